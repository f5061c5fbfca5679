# DAPE (llmc/dape.h), the second compile-time switch: its variables and checks, and the
# binaries' names. Included by the Makefile, which defines PE, pe_flag and open_paren.
# The base, the variant, a width other than 32 and the edge rule 0 make the "stem" of a
# binary's name (after train_gpt2_, test_gpt2_, ...), and the stem makes the flags:
#   kerple_dape1x3_d64_edge0 -> -DPE_KERPLE -DDAPE_KERNEL=3 -DDAPE_WIDTH=64 -DDAPE_EDGE_EXACT=0
DAPE ?=
DAPE_D ?= 32
DAPE_EDGE_EXACT ?= 1
DAPE_LIST := mlp 1x3 1x5 1x7
DAPE_BASES := $(shell sed -n 's/^ *X[$(open_paren)] *[0-9]*, *[A-Z0-9_]*, *\([a-z0-9_]*\), *[a-z0-9_]*, *[A-Z]*, *[01], *1,.*/\1/p' llmc/pe_list.h)
ifneq ($(DAPE),)
  ifeq ($(filter $(DAPE),$(DAPE_LIST)),)
    $(error unknown DAPE '$(DAPE)'; valid: $(DAPE_LIST))
  endif
  ifeq ($(filter $(PE),$(DAPE_BASES)),)
    $(error DAPE runs on the bases $(DAPE_BASES), not PE=$(PE))
  endif
  ifeq ($(shell echo '$(DAPE_D)' | grep -Ex '[1-9][0-9]{0,3}'),)
    $(error DAPE_D must be a width from 1 to 1024, not '$(DAPE_D)')
  endif
  ifeq ($(filter $(DAPE_EDGE_EXACT),0 1),)
    $(error DAPE_EDGE_EXACT must be 0 or 1)
  endif
endif
STEM := $(PE)$(if $(DAPE),_dape$(DAPE)$(if $(filter-out 32,$(DAPE_D)),_d$(DAPE_D))$(if $(filter 0,$(DAPE_EDGE_EXACT)),_edge0))
stem_words = $(subst _, ,$(1))
stem_dape = $(patsubst dape%,%,$(filter dape%,$(call stem_words,$(1))))
stem_pe = $(firstword $(subst _dape, ,$(1)))
dape_kernel = $(if $(filter mlp,$(1)),1,$(patsubst 1x%,%,$(1)))
dape_flags = $(if $(call stem_dape,$(1)),-DDAPE_KERNEL=$(call dape_kernel,$(call stem_dape,$(1))) \
  $(patsubst d%,-DDAPE_WIDTH=%,$(filter-out dape%,$(filter d%,$(call stem_words,$(1))))) \
  $(if $(filter edge0,$(call stem_words,$(1))),-DDAPE_EDGE_EXACT=0))
stem_flags = $(call pe_flag,$(call stem_pe,$(1))) $(call dape_flags,$(1))
