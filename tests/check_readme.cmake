# Fails unless README.md contains examples/first_program.cpp verbatim.
file(READ ${README} readme)
file(READ ${PROGRAM} program)
string(FIND "${readme}" "${program}" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "README.md does not contain examples/first_program.cpp verbatim")
endif()
