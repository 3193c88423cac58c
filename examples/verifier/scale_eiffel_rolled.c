/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Eiffel NF of examples/nf/eiffel.c as the scale test's verdict-parity
 * case: the plain build with 64 buckets, a steady verdict and both loops
 * left rolled. The kernel (6.18) refuses it, "The sequence of 8193 jumps is
 * too complex." at insn 249 after 102,452 processed instructions, and so
 * must bpfjet (its pending-branch limit, at the same instruction). The
 * second loop's counter is spilled at fp-16 and destroyed by the 4-byte key
 * store at fp-12, so the loop is bounded only by the queue length, which
 * falls by one per lap.
 */
#define NPRIO 64
#define STEADY_VERDICT 1
#define ROLLED_LOOPS 1
#include "../nf/eiffel.c"
