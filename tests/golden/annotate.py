#!/usr/bin/env python3
"""Annotated hex dump of a .agentmem file, in the grammar of docs/format.md §9.

    python3 tests/golden/annotate.py FILE                 print the ```hexdump block
    python3 tests/golden/annotate.py FILE --update DOC    replace the one ```hexdump
                                                          block of DOC with it
    python3 tests/golden/annotate.py FILE --check DOC     exit 1 if DOC's block differs

The output is what tests/format/golden_test.cc parses (tests/golden/README.md):
`#` starts a comment; every other non-blank line is a hex offset, equal to the
number of bytes before it, then bytes as two hex digits each, or `00*N` for N
zero bytes. Every byte of the file appears exactly once, in order, so the block
parses back to exactly the file.

The layouts below are those of docs/format.md (file header §3.1, superblocks
§3.2, pages §4, records §5). When the format changes, change them here in the
same commit as the doc, then regenerate §9 with --update. Python standard
library only. A zstd-compressed payload is shown as opaque bytes (the standard
library cannot decompress it); the golden file has none.
"""

import argparse
import datetime
import struct
import sys

HEADER_SIZE = 64
SUPERBLOCK_OFFSETS = (512, 1024)
SUPERBLOCK_SIZE = 64
FIRST_PAGE = 4096
PAGE_HEADER_SIZE = 32
PAGE_ALIGN = 16
MAX_PAYLOAD = 1 << 30
FOREVER = (1 << 63) - 1
COMMENT_COLUMN = 56  # "000000  " + 16 bytes as "xx " = 8 + 48
WIDTH = 16
MAX_SHOWN_CHARS = 60  # longer strings are cut short in comments

PAGE_TYPES = {1: "episodes", 2: "blocks", 3: "facts", 4: "commit", 5: "meta", 6: "graph",
              7: "text"}

# ---------------------------------------------------------------- checksums


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def mask(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def unmask(m):
    r = (m - 0xA282EAD8) & 0xFFFFFFFF
    return ((r >> 17) | (r << 15)) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283

# ---------------------------------------------------------------- output


class Malformed(Exception):
    pass


class Dump:
    """Emits the bytes of `data` in order, each run with its comment."""

    def __init__(self, data):
        self.data = data
        self.pos = 0
        self.lines = []

    def left(self):
        return len(self.data) - self.pos

    def banner(self, text):
        if self.lines:
            self.lines.append("")
        self.lines.append("# ==== %s ====" % text)

    def note(self, text):
        self.lines.append("# " + text)

    def _line(self, offset, tokens, comment):
        text = "%06x  %s" % (offset, " ".join(tokens))
        if comment:
            text = text.ljust(COMMENT_COLUMN - 1) + " # " + comment
        self.lines.append(text.rstrip())

    def field(self, n, comment):
        """n bytes as hex, 16 to a line; the comment goes on the first line."""
        if n > self.left():
            raise Malformed("%s: needs %d bytes, %d left" % (comment, n, self.left()))
        end = self.pos + n
        first = True
        while self.pos < end:
            k = min(WIDTH, end - self.pos)
            chunk = self.data[self.pos:self.pos + k]
            self._line(self.pos, ["%02x" % b for b in chunk], comment if first else "")
            self.pos += k
            first = False

    def zeros(self, n, comment):
        """n bytes expected to be zero: `00*n` if they are, else hex and a warning."""
        n = min(n, self.left())
        if n <= 0:
            return
        chunk = self.data[self.pos:self.pos + n]
        if any(chunk):
            self.field(n, comment + " -- NOT ZERO")
            return
        self._line(self.pos, ["00*%d" % n], comment)
        self.pos += n

    def zero_field(self, n, comment):
        """A short reserved field: its zero bytes spelled out, or `00*n` past 16."""
        if n > WIDTH:
            self.zeros(n, comment)
            return
        chunk = self.data[self.pos:self.pos + n]
        self.field(n, comment if not any(chunk) else comment + " -- NOT ZERO")

    # Fixed-width fields. Each returns the value.
    def u8(self, name, describe=None):
        v = self._peek(1, "<B", name)
        self.field(1, self._say(name, v, describe))
        return v

    def u16(self, name, describe=None):
        v = self._peek(2, "<H", name)
        self.field(2, self._say(name, v, describe))
        return v

    def u32(self, name, describe=None):
        v = self._peek(4, "<I", name)
        self.field(4, self._say(name, v, describe))
        return v

    def u64(self, name, describe=None):
        v = self._peek(8, "<Q", name)
        self.field(8, self._say(name, v, describe))
        return v

    def i64(self, name, describe=None):
        v = self._peek(8, "<q", name)
        self.field(8, self._say(name, v, describe))
        return v

    def f32(self, name):
        v = self._peek(4, "<f", name)
        self.field(4, "%s = %s" % (name, _float(v)))
        return v

    def _peek(self, n, fmt, name):
        if n > self.left():
            raise Malformed("%s: needs %d bytes, %d left" % (name, n, self.left()))
        return struct.unpack_from(fmt, self.data, self.pos)[0]

    @staticmethod
    def _say(name, v, describe):
        return "%s = %s" % (name, describe(v) if describe else v)

    # Variable-width fields (§2).
    def _varint_len(self, limit):
        n, value, shift = 0, 0, 0
        while True:
            if self.pos + n >= limit:
                raise Malformed("varint runs past the end of the record")
            b = self.data[self.pos + n]
            n += 1
            if n == 10 and b > 1:
                raise Malformed("varint overflows 64 bits")
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value, n
            if n == 10:
                raise Malformed("varint longer than 10 bytes")

    def varint(self, name, limit, describe=None):
        v, n = self._varint_len(limit)
        self.field(n, self._say(name, v, describe))
        return v

    def svarint(self, name, limit, describe=None):
        u, n = self._varint_len(limit)
        v = (u >> 1) ^ -(u & 1)
        self.field(n, self._say(name, v, describe))
        return v

    def string(self, name, limit):
        n = self.varint(name + " length", limit)
        if n > limit - self.pos:
            raise Malformed("%s: %d bytes, %d left in the record" % (name, n, limit - self.pos))
        raw = bytes(self.data[self.pos:self.pos + n])
        if n:
            self.field(n, "%s = %s" % (name, _quote(raw)))
        return raw


def _float(v):
    r = repr(float(v))
    # The f32 value exactly as stored, shortest form that round-trips in f32.
    for digits in range(1, 10):
        s = "%.*g" % (digits, v)
        if struct.unpack("<f", struct.pack("<f", float(s)))[0] == v:
            r = s
            break
    return r


def _quote(raw):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "(not UTF-8) " + raw[:MAX_SHOWN_CHARS].hex()
    cut = len(text) > MAX_SHOWN_CHARS
    text = text[:MAX_SHOWN_CHARS]
    out = []
    for ch in text:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"' + ("..." if cut else "")


def hexoff(v):
    return "%d (0x%x)" % (v, v)


def utc(us, how=""):
    """A time (§2) with its UTC reading; `how` says how it is encoded."""
    suffix = ", " + how if how else ""
    if us == FOREVER:
        return "kForever (no end%s)" % suffix
    try:
        t = datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=us)
    except OverflowError:
        return "%d (%s)" % (us, how) if how else str(us)
    frac = ".%06d" % t.microsecond if t.microsecond else ""
    return "%d (%s%sZ%s)" % (us, t.strftime("%Y-%m-%dT%H:%M:%S"), frac, suffix)


def utc_zigzag(us):
    return utc(us, "zigzag varint")


def checksum_comment(stored, covered, what):
    computed = crc32c(covered)
    if unmask(stored) == computed:
        return "checksum: mask(CRC-32C of %s)" % what
    return "checksum: MISMATCH, stored %08x, mask(CRC-32C of %s) is %08x" % (
        stored, what, mask(computed))


# ---------------------------------------------------------------- structures


def file_header(d):
    data = d.data
    d.banner("file header: offset 0, 64 bytes")
    if len(data) < HEADER_SIZE:
        d.note("the file is shorter than its 64-byte header")
        return None
    d.field(8, "magic: 89 \"AGM\" CR LF 1A LF" if data[:8] == b"\x89AGM\r\n\x1a\n"
            else "magic -- WRONG, not an agentmem file")
    d.u16("read_version")
    d.u16("write_version")
    d.u32("page_size")
    d.u32("page_align")
    d.u32("first_page", hexoff)
    salt = d.u64("salt", lambda v: "0x%016x" % v)
    d.i64("created_at", lambda v: utc(v, "unix microseconds"))
    d.u32("flags")
    d.zero_field(16, "reserved, zero")
    stored = struct.unpack_from("<I", data, 60)[0]
    d.field(4, checksum_comment(stored, data[:60], "bytes 0-59"))
    return salt


def superblock(d, slot, salt, next_offset, next_name):
    off = SUPERBLOCK_OFFSETS[slot]
    name = "AB"[slot]
    d.banner("superblock %s: offset %d, 64 bytes" % (name, off))
    if d.left() < SUPERBLOCK_SIZE:
        d.note("cut short")
        return
    data = d.data
    d.field(4, 'magic "AGSB"' if data[off:off + 4] == b"AGSB" else 'magic -- WRONG, not "AGSB"')
    d.zero_field(4, "reserved, zero")
    d.u64("generation")
    d.u64("salt", lambda v: "0x%016x%s" % (
        v, " (must equal the header salt)" if v == salt else " -- DIFFERS from the header salt"))
    d.u64("scan_from", hexoff)
    d.u64("commit_seq")
    d.u64("durable_through", lambda v: hexoff(v) + (
        ": nothing vouched for" if v == 0 else ": every byte before it was synced"))
    d.u64("checkpoint", lambda v: "none" if v == 0 else hexoff(v))
    d.zero_field(4, "reserved, zero")
    stored = struct.unpack_from("<I", data, off + 60)[0]
    d.field(4, checksum_comment(stored, data[off:off + 60], "bytes 0-59"))
    d.zeros(next_offset - d.pos, "unused, zero (up to %s at %d)" % (next_name, next_offset))


def episode(d, end):
    d.u64("id")
    d.svarint("ts", end, utc_zigzag)
    d.svarint("created_at", end, utc_zigzag)
    for name in ("user_id", "session_id", "role", "text", "metadata"):
        d.string(name, end)
    dim = d.varint("vector dimension", end,
                   lambda v: "%d%s" % (v, " (no vector)" if v == 0 else ""))
    if dim > (end - d.pos) // 4:
        raise Malformed("vector of %d components does not fit" % dim)
    for i in range(dim):
        d.f32("vector[%d]" % i)


def block(d, end):
    d.u64("version")
    for name in ("user_id", "name", "value"):
        d.string(name, end)
    d.varint("limit", end, lambda v: "%d%s" % (v, " (no limit)" if v == 0 else " characters"))
    d.svarint("pinned_order", end, lambda v: "%d%s" % (v, " (not pinned)" if v == -1 else ""))
    d.svarint("updated_at", end, utc_zigzag)


def fact(d, end):
    d.u64("id")
    for name in ("user_id", "subject", "predicate", "object"):
        d.string(name, end)
    d.f32("confidence")
    n = d.varint("source_count", end)
    if n > (end - d.pos) // 8:
        raise Malformed("%d source episode ids do not fit" % n)
    for i in range(n):
        d.u64("source_episode_ids[%d]" % i)
    for name in ("valid_from", "valid_to", "recorded_at", "expired_at"):
        d.svarint(name, end, utc_zigzag)


def meta(d, end):
    n = d.varint("meta record: entry count", end)
    for _ in range(n):
        d.string("key", end)
        d.string("value", end)


def text(d, end):
    d.u64("episode_id")
    d.varint("doc_len (tokens)", end)
    n = d.varint("term count", end)
    for i in range(n):
        d.string("term[%d]" % i, end)
        d.varint("tf", end)


def graph(d, end):
    d.field(end - d.pos, "HNSW graph image (layout: docs/format.md section 5.6)")


RECORDS = {1: ("episode", episode), 2: ("block version", block), 3: ("fact", fact),
           5: ("meta", meta), 6: ("graph", graph), 7: ("text", text)}


def commit_record(d):
    d.u64("commit_seq")
    d.u64("txn_start", hexoff)
    d.u64("durable_through", hexoff)
    d.u32("page_count")
    d.zero_field(4, "reserved, zero")
    d.i64("commit_ts", utc)
    d.u64("next_episode_id")
    d.u64("next_fact_id")
    d.u64("next_block_version")


def record_payload(d, ptype, count, end):
    name, decode = RECORDS[ptype]
    for i in range(count):
        start = d.pos
        try:
            n = d.varint("record %d: length" % i, end)
            if n > end - d.pos:
                raise Malformed("record %d: %d bytes, %d left in the payload" % (i, n, end - d.pos))
            rec_end = d.pos + n
            decode(d, rec_end)
            if d.pos != rec_end:
                raise Malformed("%d bytes left over in the %s record" % (rec_end - d.pos, name))
        except Malformed as e:
            d.pos = start
            del_from = _first_line_at(d, start)
            del d.lines[del_from:]
            d.field(end - start, "records %d on: MALFORMED (%s)" % (i, e))
            return
    if d.pos != end:
        d.field(end - d.pos, "bytes after the last record -- MALFORMED")


def _first_line_at(d, offset):
    """Index of the first output line that shows bytes at or after offset."""
    for idx in range(len(d.lines) - 1, -1, -1):
        line = d.lines[idx]
        if line and not line.startswith("#"):
            if int(line.split()[0], 16) < offset:
                return idx + 1
    return 0


def pages(d, salt):
    data = d.data
    txn = 1
    while d.left() > 0:
        off = d.pos
        if d.left() < PAGE_HEADER_SIZE:
            d.banner("offset %s: %d bytes, too few for a page header" % (hexoff(off), d.left()))
            d.field(d.left(), "cut-short page (a torn tail)")
            break
        (stored, ptype, flags, reserved, psalt, length, page_no, raw_length,
         count) = struct.unpack_from("<IBBHIIQII", data, off)
        size = (PAGE_HEADER_SIZE + length + 15) & ~15
        tname = PAGE_TYPES.get(ptype, "invalid (type %d)" % ptype)
        role = ("ends transaction %d" % txn) if ptype == 4 else ("transaction %d" % txn)
        d.banner("%s page (%s): offset %s, page number %d, %d bytes" % (
            tname, role, hexoff(off), off // PAGE_ALIGN, size))
        if length > MAX_PAYLOAD or size > d.left():
            d.note("length %d runs past the end of the file: a cut-short page (a torn tail)" % length)
            d.field(d.left(), "the rest of the file")
            break
        d.field(4, checksum_comment(stored, data[off + 4:off + size],
                                    "page bytes 4 to the end of padding"))
        d.u8("type", lambda v: "%d (%s)" % (v, tname) if v in PAGE_TYPES else "%d -- INVALID" % v)
        d.u8("flags", lambda v: "%d (%s)" % (v, "zstd-compressed" if v & 1 else "not compressed")
             + (" -- RESERVED BITS SET" if v & ~1 else ""))
        d.zero_field(2, "reserved, zero")
        d.u32("salt", lambda v: "0x%08x (%s)" % (
            v, "low 32 bits of the file salt" if salt is not None and v == salt & 0xFFFFFFFF
            else "DIFFERS from the low 32 bits of the file salt"))
        d.u32("length", lambda v: "%d (payload bytes stored)" % v)
        d.u64("page_no", lambda v: "%d (offset / 16)" % v if v == off // PAGE_ALIGN
              else "%d -- WRONG, offset / 16 is %d" % (v, off // PAGE_ALIGN))
        d.u32("raw_length")
        d.u32("record_count")
        payload_end = d.pos + length
        if flags & 1:
            d.field(length, "zstd frame, %d bytes decompressing to %d (not decoded here)"
                    % (length, raw_length))
        elif ptype == 4 and length == 64:
            commit_record(d)
        elif ptype in RECORDS:
            record_payload(d, ptype, count, payload_end)
        else:
            d.field(length, "payload (not decoded: invalid type or length)")
        d.zeros(off + size - d.pos, "padding to a multiple of 16")
        if ptype == 4:
            txn += 1


def annotate(data):
    d = Dump(data)
    salt = file_header(d)
    if salt is not None and len(data) > HEADER_SIZE:
        d.zeros(SUPERBLOCK_OFFSETS[0] - d.pos, "unused, zero (up to superblock A at 512)")
        if d.left() > 0:
            superblock(d, 0, salt, SUPERBLOCK_OFFSETS[1], "superblock B")
        if d.left() > 0:
            superblock(d, 1, salt, FIRST_PAGE, "the first page")
        if d.left() > 0:
            pages(d, salt)
    if d.left() > 0:  # only when the header itself is unusable
        d.field(d.left(), "the rest of the file (not decoded)")
    d.lines.append("")
    d.lines.append("# end of file: %d bytes" % len(data))
    return "```hexdump\n" + "\n".join(d.lines) + "\n```\n"


# ---------------------------------------------------------------- docs


def replace_block(markdown, block):
    start = markdown.find("\n```hexdump\n")
    if start < 0 or markdown.find("\n```hexdump\n", start + 1) >= 0:
        raise SystemExit("expected exactly one ```hexdump block")
    start += 1
    end = markdown.find("\n```\n", start)
    if end < 0:
        raise SystemExit("the ```hexdump block is not closed")
    return markdown[:start] + block + markdown[end + len("\n```\n"):]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="the .agentmem file")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--update", metavar="DOC", help="replace the ```hexdump block of DOC")
    group.add_argument("--check", metavar="DOC", help="exit 1 unless DOC holds this block")
    args = ap.parse_args()
    with open(args.file, "rb") as f:
        block = annotate(f.read())
    if not args.update and not args.check:
        sys.stdout.write(block)
        return 0
    doc = args.update or args.check
    with open(doc, encoding="utf-8") as f:
        markdown = f.read()
    new = replace_block(markdown, block)
    if args.check:
        if new != markdown:
            print("%s: the ```hexdump block is not the dump of %s" % (doc, args.file),
                  file=sys.stderr)
            return 1
        return 0
    if new != markdown:
        with open(doc, "w", encoding="utf-8") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
