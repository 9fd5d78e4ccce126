#!/bin/sh
# index/text/glove/incbin.sh TABLE OUT.S -- writes an assembler file that
# includes TABLE's bytes as the read-only, hidden symbols agentmem_glove_table
# and agentmem_glove_table_end (index/text/glove/linked_table.cc reads them).
set -e
cat > "$2" <<ASM
	.section .rodata.agentmem_glove_table,"a"
	.balign 64
	.globl agentmem_glove_table
	.hidden agentmem_glove_table
agentmem_glove_table:
	.incbin "$1"
	.globl agentmem_glove_table_end
	.hidden agentmem_glove_table_end
agentmem_glove_table_end:
	.section .note.GNU-stack,"",@progbits
ASM
