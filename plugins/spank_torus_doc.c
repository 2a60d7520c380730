/*
 * spank_torus_doc.c: prints the option and the plugstack.conf arguments of
 * spank_torus.so as --help-style text (sections OPTIONS and PLUGSTACK
 * ARGUMENTS), from the very strings and tables the plugin uses: the option
 * macros of torus_plugin.h and torus_layout_plugstack_doc() over
 * topology/plugstack.c's parse table and the cost model's keys. The build
 * turns this text into spank_torus(8) with tools/help2roff, so a new
 * argument reaches the man page without anyone editing it. Built, never
 * installed; calls no Slurm function (it only needs spank.h's types).
 */
#include "config.h"

#include <stdio.h>

#include "plugins/torus_plugin.h"

int main(void)
{
    printf("OPTIONS\n    --%s[=%s]\n        %s\n\nPLUGSTACK ARGUMENTS\n",
           TORUS_PLUGIN_OPTION, TORUS_PLUGIN_OPTION_ARG,
           TORUS_PLUGIN_OPTION_HELP);

    char buf[256];
    torus_layout_plugstack_doc_t d;
    for (size_t i = 0; torus_layout_plugstack_doc(i, &d, buf, sizeof buf) == 0;
         i++) {
        printf("    %s%s%s\n", d.key, d.value ? "=" : "",
               d.value ? d.value : "");
        if (!d.help) {
            /* The page says so and the man page test fails on it. */
            fprintf(stderr,
                    "spank_torus_doc: plugstack argument '%s' is "
                    "undocumented: add it to _docs in topology/plugstack.c\n",
                    d.key);
        }
        printf("        %s\n", d.help ? d.help
                                      : "UNDOCUMENTED (add it to _docs in "
                                        "topology/plugstack.c)");
    }
    /* Exit 0 all the same: the build goes on, tests/unit/man_pages.sh fails. */
    return 0;
}
