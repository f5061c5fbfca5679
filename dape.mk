# DAPE (pe/dape.h), the second compile-time switch: its variables and checks, and the
# binaries' names. Included by the Makefile, which defines PE, pe_flag and open_paren.
# The base, the variant, a width other than 32 and the edge rule 0 make the "stem" of a
# binary's name (after train_gpt2_, test_gpt2_, ...), and the stem makes the flags:
#   kerple_dape1x3_d64_edge0 -> -DPE_KERPLE -DDAPE_KERNEL=3 -DDAPE_WIDTH=64 -DDAPE_EDGE_EXACT=0
DAPE ?=
DAPE_D ?= 32
DAPE_EDGE_EXACT ?= 1
DAPE_LIST := mlp 1x3 1x5 1x7
DAPE_BASES := $(shell sed -n 's/^ *X[$(open_paren)] *[0-9]*, *[A-Z0-9_]*, *\([a-z0-9_]*\), *[a-z0-9_]*, *[A-Z]*, *[01], *1,.*/\1/p' llmc/pe_list.h)
DAPE_WIDTHS := $(shell seq 1 1024)
comma := ,
# The first error in a build's names, empty if none: build_error PE,DAPE,DAPE_D,DAPE_EDGE_EXACT
# (each exactly one word of its list: a value of several words is none of them). The
# variables given to make are checked here, and so is the stem of every binary's name, where
# a target is named directly (stem_flags).
one_of = $(filter-out 1,$(words $(1)))$(filter-out $(2),$(1))
build_error = $(strip \
  $(if $(call one_of,$(1),$(PE_LIST)),unknown PE '$(1)'; valid names: $(PE_LIST),\
  $(if $(2),\
    $(if $(call one_of,$(2),$(DAPE_LIST)),unknown DAPE '$(2)'; valid: $(DAPE_LIST),\
    $(if $(filter-out $(DAPE_BASES),$(1)),DAPE runs on the bases $(DAPE_BASES)$(comma) not PE=$(1),\
    $(if $(call one_of,$(3),$(DAPE_WIDTHS)),DAPE_D must be a width from 1 to 1024$(comma) not '$(3)',\
    $(if $(call one_of,$(4),0 1),DAPE_EDGE_EXACT must be 0 or 1)))))))
ifneq ($(call build_error,$(PE),$(DAPE),$(DAPE_D),$(DAPE_EDGE_EXACT)),)
  $(error $(call build_error,$(PE),$(DAPE),$(DAPE_D),$(DAPE_EDGE_EXACT)))
endif
STEM := $(PE)$(if $(DAPE),_dape$(DAPE)$(if $(filter-out 32,$(DAPE_D)),_d$(DAPE_D))$(if $(filter 0,$(DAPE_EDGE_EXACT)),_edge0))
stem_words = $(subst _, ,$(1))
stem_dape = $(patsubst dape%,%,$(filter dape%,$(call stem_words,$(1))))
stem_pe = $(firstword $(subst _dape, ,$(1)))
dape_kernel = $(if $(filter mlp,$(1)),1,$(patsubst 1x%,%,$(1)))
dape_flags = $(if $(call stem_dape,$(1)),-DDAPE_KERNEL=$(call dape_kernel,$(call stem_dape,$(1))) \
  $(patsubst d%,-DDAPE_WIDTH=%,$(filter-out dape%,$(filter d%,$(call stem_words,$(1))))) \
  $(if $(filter edge0,$(call stem_words,$(1))),-DDAPE_EDGE_EXACT=0))
# a stem's names (of a target named directly too, such as build/train_gpt2_kerple_dape1x3_d0)
# checked as the variables are, and the stem they make must be the stem itself
stem_rest = $(subst _, ,$(word 2,$(subst _dape, ,$(1))))
stem_d = $(or $(patsubst d%,%,$(filter d%,$(call stem_rest,$(1)))),32)
stem_edge = $(if $(filter edge0,$(call stem_rest,$(1))),0,1)
stem_of = $(1)$(if $(2),_dape$(2)$(if $(filter-out 32,$(3)),_d$(3))$(if $(filter 0,$(4)),_edge0))
stem_names_of = $(call stem_of,$(call stem_pe,$(1)),$(call stem_dape,$(1)),$(call stem_d,$(1)),$(call stem_edge,$(1)))
stem_error = $(or $(call build_error,$(call stem_pe,$(1)),$(call stem_dape,$(1)),$(call stem_d,$(1)),$(call stem_edge,$(1))),$(if \
  $(filter-out $(call stem_names_of,$(1)),$(1)),not a binary's name (its names make $(call stem_names_of,$(1)))))
stem_flags = $(if $(call stem_error,$(1)),$(error $(1): $(call stem_error,$(1))))$(call pe_flag,$(call stem_pe,$(1))) $(call dape_flags,$(1))
