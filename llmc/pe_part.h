/*
Includes one part of the selected encoding's file (llmc/pe.h: PE_FILE, pe/<file>.h): the
includer defines PE_PART first, e.g.

    #define PE_PART PE_PART_CPU
    #include "llmc/pe_part.h"
    #undef PE_PART

(from here, so that the file's path is the same for every includer). No include guard:
each part is included once, by its own includer.
*/
#ifndef PE_PART
#error "define PE_PART (llmc/pe.h: PE_PART_DEFINITION, PE_PART_CPU, PE_PART_CUDA, PE_PART_TEST, PE_PART_REF) before including pe_part.h"
#endif
#include PE_FILE
