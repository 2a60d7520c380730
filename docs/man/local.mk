# docs/man/local.mk: the man pages. Each tool's page is its own --help text
# (OPTIONS, EXIT STATUS and whatever else the template pulls in) merged into
# a hand-written roff template, docs/man/PAGE.in, by tools/help2roff at build
# time, so that --help and the page cannot drift. spank_torus(8) is built the
# same way from plugins/spank-torus-doc, which prints the plugin's option and
# plugstack arguments from the tables the plugin parses with. torus(7), the
# environment contract, has no program behind it and is written by hand.
# tests/unit/man_pages.sh lints every page and checks it against --help.

MAN_GENERATED = \
	docs/man/torus-layout.1 \
	docs/man/torus-pack.1 \
	docs/man/torus-data-bench.1 \
	docs/man/torus-train.1 \
	docs/man/torus-bench.1 \
	docs/man/torus-plot.1 \
	docs/man/torus-sweep.1 \
	docs/man/torus-torch.1 \
	docs/man/spank_torus.8
man_MANS += $(MAN_GENERATED)
dist_man_MANS += docs/man/torus.7
EXTRA_DIST += $(MAN_GENERATED:=.in) tools/help2roff
CLEANFILES += $(MAN_GENERATED)

noinst_PROGRAMS += plugins/spank-torus-doc
plugins_spank_torus_doc_SOURCES = plugins/spank_torus_doc.c
plugins_spank_torus_doc_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CFLAGS)
plugins_spank_torus_doc_LDADD = topology/libtoruslayout.la $(SLURM_LIBS) -lm

# $< is the program whose --help feeds the page $@ (the doc program ignores
# its arguments). The help text goes through a file so that a program that
# fails stops the build instead of yielding an empty section.
HELP2ROFF_RUN = $(AM_V_GEN)$(MKDIR_P) docs/man && \
	$< --help >$@.help && \
	$(SHELL) $(top_srcdir)/tools/help2roff $(top_srcdir)/docs/man/$(@F).in $@.help \
		'$(PACKAGE_VERSION)' >$@.tmp && \
	rm -f $@.help && mv $@.tmp $@
HELP2ROFF_DEPS = $(top_srcdir)/tools/help2roff

docs/man/torus-layout.1: topology/torus-layout$(EXEEXT) $(top_srcdir)/docs/man/torus-layout.1.in $(HELP2ROFF_DEPS)
	$(HELP2ROFF_RUN)
docs/man/torus-pack.1: data/torus-pack$(EXEEXT) $(top_srcdir)/docs/man/torus-pack.1.in $(HELP2ROFF_DEPS)
	$(HELP2ROFF_RUN)
docs/man/torus-data-bench.1: data/torus-data-bench$(EXEEXT) $(top_srcdir)/docs/man/torus-data-bench.1.in $(HELP2ROFF_DEPS)
	$(HELP2ROFF_RUN)
docs/man/torus-train.1: trainer/torus-train$(EXEEXT) $(top_srcdir)/docs/man/torus-train.1.in $(HELP2ROFF_DEPS)
	$(HELP2ROFF_RUN)
docs/man/torus-bench.1: trainer/bench/torus-bench$(EXEEXT) $(top_srcdir)/docs/man/torus-bench.1.in $(HELP2ROFF_DEPS)
	$(HELP2ROFF_RUN)
docs/man/torus-plot.1: $(top_srcdir)/trainer/torus-plot $(top_srcdir)/docs/man/torus-plot.1.in $(HELP2ROFF_DEPS)
	$(HELP2ROFF_RUN)
docs/man/torus-sweep.1: trainer/sweep/torus-sweep$(EXEEXT) $(top_srcdir)/docs/man/torus-sweep.1.in $(HELP2ROFF_DEPS)
	$(HELP2ROFF_RUN)
docs/man/torus-torch.1: $(top_srcdir)/tools/torus-torch $(top_srcdir)/docs/man/torus-torch.1.in $(HELP2ROFF_DEPS)
	$(HELP2ROFF_RUN)
docs/man/spank_torus.8: plugins/spank-torus-doc$(EXEEXT) $(top_srcdir)/docs/man/spank_torus.8.in $(HELP2ROFF_DEPS)
	$(HELP2ROFF_RUN)

TESTS += tests/unit/man_pages.sh
EXTRA_DIST += tests/unit/man_pages.sh
