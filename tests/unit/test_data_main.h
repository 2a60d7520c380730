/* test_data_main.h: the Check runner shared by the data unit tests. */
#ifndef TORUS_TEST_DATA_MAIN_H
#define TORUS_TEST_DATA_MAIN_H

#include <check.h>

/* Run every test of S; exit status 0 when all passed. */
static inline int tdata_test_run(Suite *s)
{
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int nf = srunner_ntests_failed(r);
    srunner_free(r);
    return nf ? 1 : 0;
}

#endif
