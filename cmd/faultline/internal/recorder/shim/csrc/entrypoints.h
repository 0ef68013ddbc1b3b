/*
 * entrypoints.h — the allocator families' own entry points, which the
 * family objects of the shim interpose (family.c, stubs-x86_64.S).
 * Generated from perfdata/schema's EntryPoints, the table record's uprobes
 * and analyze read too, by
 *   go test ./cmd/faultline/internal/recorder/shim -run TestEntryPointsHeader -update
 * Do not edit.
 *
 * FL_EP(line, symbol, fn, families, isfree, nargs, size_arg, nmemb_arg, whole):
 *   fn         the entry point's index in the table (fl_rec.fn)
 *   families   a bit per family that has it (1 << the family's FL_FAM_*)
 *   isfree     1: it frees its first argument
 *   nargs      the integer arguments recorded (the table's Args)
 *   size_arg   the argument that gives the bytes asked for; with
 *   nmemb_arg  (not -1) the count they are multiplied by
 *   whole      1: a call from the program's code may be written whole at
 *              its return (at most two arguments, no status, and it does
 *              not throw: an exception would leave the ring busy)
 */
#ifndef FAULTLINE_ENTRYPOINTS_H
#define FAULTLINE_ENTRYPOINTS_H

#define FL_FAM_OTHER 0
#define FL_FAM_GLIBC 1
#define FL_FAM_JEMALLOC 2
#define FL_FAM_TCMALLOC 3
#define FL_FAM_MIMALLOC 4
#define FL_NFN_ALL 53

#define FL_NEP 47

#define FL_EPS \
	FL_EP(0, _Znwm, 10, 0x1c, 0, 1, 0, -1, 0) \
	FL_EP(1, _Znam, 11, 0x1c, 0, 1, 0, -1, 0) \
	FL_EP(2, _ZnwmRKSt9nothrow_t, 12, 0x1c, 0, 1, 0, -1, 1) \
	FL_EP(3, _ZnamRKSt9nothrow_t, 13, 0x1c, 0, 1, 0, -1, 1) \
	FL_EP(4, _ZnwmSt11align_val_t, 14, 0x1c, 0, 2, 0, -1, 0) \
	FL_EP(5, _ZnamSt11align_val_t, 15, 0x1c, 0, 2, 0, -1, 0) \
	FL_EP(6, _ZdlPv, 16, 0x1c, 1, 1, 0, -1, 0) \
	FL_EP(7, _ZdaPv, 17, 0x1c, 1, 1, 0, -1, 0) \
	FL_EP(8, _ZdlPvm, 18, 0x1c, 1, 1, 0, -1, 0) \
	FL_EP(9, _ZdaPvm, 19, 0x1c, 1, 1, 0, -1, 0) \
	FL_EP(10, _ZdlPvSt11align_val_t, 20, 0x1c, 1, 1, 0, -1, 0) \
	FL_EP(11, _ZdlPvmSt11align_val_t, 21, 0x1c, 1, 1, 0, -1, 0) \
	FL_EP(12, _ZnwmSt11align_val_tRKSt9nothrow_t, 22, 0x1c, 0, 2, 0, -1, 1) \
	FL_EP(13, _ZnamSt11align_val_tRKSt9nothrow_t, 23, 0x1c, 0, 2, 0, -1, 1) \
	FL_EP(14, _ZdlPvRKSt9nothrow_t, 24, 0x1c, 1, 1, 0, -1, 0) \
	FL_EP(15, _ZdaPvRKSt9nothrow_t, 25, 0x1c, 1, 1, 0, -1, 0) \
	FL_EP(16, _ZdaPvSt11align_val_t, 26, 0x1c, 1, 1, 0, -1, 0) \
	FL_EP(17, _ZdaPvmSt11align_val_t, 27, 0x1c, 1, 1, 0, -1, 0) \
	FL_EP(18, mallocx, 28, 0x4, 0, 2, 0, -1, 1) \
	FL_EP(19, je_mallocx, 28, 0x4, 0, 2, 0, -1, 1) \
	FL_EP(20, rallocx, 29, 0x4, 0, 3, 1, -1, 0) \
	FL_EP(21, je_rallocx, 29, 0x4, 0, 3, 1, -1, 0) \
	FL_EP(22, sdallocx, 30, 0x4, 1, 1, 0, -1, 0) \
	FL_EP(23, je_sdallocx, 30, 0x4, 1, 1, 0, -1, 0) \
	FL_EP(24, dallocx, 31, 0x4, 1, 1, 0, -1, 0) \
	FL_EP(25, je_dallocx, 31, 0x4, 1, 1, 0, -1, 0) \
	FL_EP(26, tc_malloc, 32, 0x8, 0, 1, 0, -1, 1) \
	FL_EP(27, tc_calloc, 33, 0x8, 0, 2, 1, 0, 1) \
	FL_EP(28, tc_realloc, 34, 0x8, 0, 2, 1, -1, 1) \
	FL_EP(29, tc_free, 35, 0x8, 1, 1, 0, -1, 0) \
	FL_EP(30, tc_free_sized, 36, 0x8, 1, 1, 0, -1, 0) \
	FL_EP(31, tc_new, 37, 0x8, 0, 1, 0, -1, 0) \
	FL_EP(32, tc_newarray, 38, 0x8, 0, 1, 0, -1, 0) \
	FL_EP(33, tc_delete, 39, 0x8, 1, 1, 0, -1, 0) \
	FL_EP(34, tc_deletearray, 40, 0x8, 1, 1, 0, -1, 0) \
	FL_EP(35, tc_memalign, 41, 0x8, 0, 2, 1, -1, 1) \
	FL_EP(36, mi_malloc, 42, 0x10, 0, 1, 0, -1, 1) \
	FL_EP(37, mi_zalloc, 43, 0x10, 0, 1, 0, -1, 1) \
	FL_EP(38, mi_calloc, 44, 0x10, 0, 2, 1, 0, 1) \
	FL_EP(39, mi_realloc, 45, 0x10, 0, 2, 1, -1, 1) \
	FL_EP(40, mi_free, 46, 0x10, 1, 1, 0, -1, 0) \
	FL_EP(41, mi_new, 47, 0x10, 0, 1, 0, -1, 0) \
	FL_EP(42, mi_malloc_aligned, 48, 0x10, 0, 2, 0, -1, 1) \
	FL_EP(43, mi_zalloc_aligned, 49, 0x10, 0, 2, 0, -1, 1) \
	FL_EP(44, mi_free_size, 50, 0x10, 1, 1, 0, -1, 0) \
	FL_EP(45, mi_free_aligned, 51, 0x10, 1, 1, 0, -1, 0) \
	FL_EP(46, mi_free_size_aligned, 52, 0x10, 1, 1, 0, -1, 0)

/* FL_FN_WHOLE: the whole column by fn, for every entry point of the table. */
#define FL_FN_WHOLE {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0}

#endif
