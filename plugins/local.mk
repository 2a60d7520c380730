# plugins/local.mk: the SPANK plugin spank_torus.so.
# Built pyxis-style: hardened, and a version script so that only the symbols
# Slurm looks up (slurm_spank_*, plugin_*, spank_*) leave the object.

spank_LTLIBRARIES += plugins/spank_torus.la
plugins_spank_torus_la_SOURCES = plugins/spank_torus.c
plugins_spank_torus_la_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CFLAGS)
plugins_spank_torus_la_CFLAGS = $(AM_CFLAGS) $(HARDEN_CFLAGS)
plugins_spank_torus_la_LDFLAGS = -module -avoid-version -shared $(HARDEN_LDFLAGS) \
	-Wl,--version-script=$(top_srcdir)/plugins/spank_torus.map
# Deliberately no -lslurm: slurmstepd/srun already carry libslurm's symbols.
EXTRA_DIST += plugins/spank_torus.map
