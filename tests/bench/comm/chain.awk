# tests/bench/comm/chain.awk: the like-for-like chain of torus-bench
# --resnet50 rows, from the naive sync to ours, one change per link:
#   per-tensor flat fp32           (no fusion, the rank's own memory)
#   -> fused flat fp32 THETA       fusion
#   -> fused ALGO fp32 THETA       algorithm
#   -> fused ALGO fp16 THETA       wire
#   -> fused-shm ALGO fp16 THETA   placement (in place, shared memory)
# usage: awk -v theta=4M -v algo=torus2d -f chain.awk TORUS_BENCH_OUTPUT
# Each row's attributes are read from the row itself: fusion is on only
# where the row has fewer buckets than the model has tensors (a "fused" row
# whose theta cuts every tensor alone is not fused), placement is shared
# only for fused-shm. A link whose two rows differ in anything but its own
# attribute, or in nothing, fails the chain (exit 1, naming the link); so
# does a missing row. Otherwise it prints each factor, their product and
# the whole ratio, which must agree.
function attrs(i) {
    return "fusion=" F[i] " algo=" A[i] " wire=" W[i] " placement=" P[i]
}
function find(mode, al, wi, th,   k) {
    for (k = 1; k <= nr; k++)
        if (M[k] == mode && A[k] == al && W[k] == wi && (th == "" || T[k] == th)) return k
    return 0
}
/^# ResNet-50 v1.5 gradients: / { tensors = $5 + 0 }
$1 == "per-tensor" || $1 == "fused" || $1 == "fused-shm" {
    nr++; M[nr] = $1; A[nr] = $2; W[nr] = $3; T[nr] = $4; B[nr] = $5; TM[nr] = $6
    P[nr] = $1 == "fused-shm" ? "shared" : "private"
    F[nr] = $1 != "per-tensor" && $5 + 0 < tensors ? "on" : "off"
}
END {
    if (!tensors) { print "chain: no torus-bench --resnet50 header"; exit 1 }
    if (theta == "" || algo == "") { print "chain: set -v theta=... -v algo=..."; exit 1 }
    split("per-tensor fused fused fused fused-shm", cm, " ")
    split("flat flat " algo " " algo " " algo, ca, " ")
    split("fp32 fp32 fp32 fp16 fp16", cw, " ")
    split("- fusion algo wire placement", what, " ")
    for (i = 1; i <= 5; i++) {
        r[i] = find(cm[i], ca[i], cw[i], i == 1 ? "" : theta)
        if (!r[i]) { printf "chain: no '%s %s %s %s' row\n", cm[i], ca[i], cw[i], theta; exit 1 }
    }
    prod = 1; bad = 0
    for (i = 2; i <= 5; i++) {
        a = r[i - 1]; b = r[i]; n = 0; changed = ""
        if (F[a] != F[b]) { n++; changed = changed " fusion" }
        if (A[a] != A[b]) { n++; changed = changed " algo" }
        if (W[a] != W[b]) { n++; changed = changed " wire" }
        if (P[a] != P[b]) { n++; changed = changed " placement" }
        if (n != 1 || changed != " " what[i]) {
            printf "chain: link '%s' changes%s (%s -> %s; %d buckets for %d tensors)\n",
                what[i], n ? changed : " nothing", attrs(a), attrs(b), B[b], tensors
            bad = 1
        }
        f = TM[a] / TM[b]; prod *= f
        printf "%-9s %6.2fx  %s %s %s -> %s %s %s %s: %.2f -> %.2f ms\n", what[i], f,
            M[a], A[a], W[a], M[b], A[b], W[b], T[b], TM[a], TM[b]
    }
    all = TM[r[1]] / TM[r[5]]
    printf "all       %6.2fx  (product of the factors %.2fx)\n", all, prod
    d = prod / all - 1
    if (d > 1e-9 || d < -1e-9) { print "chain: the factors do not multiply out"; bad = 1 }
    exit bad
}
