/*
 * errname.h - errno values by their symbolic names ("EBUSY"), both ways.
 *
 * For files that record an errno from one system for another to read (the
 * RDMA rules that meshrun-rdma-probe writes on a Mac and meshsim's verbs
 * layer reads on Linux): the numbers differ between Darwin and Linux
 * (EOPNOTSUPP is 102 on one, 95 on the other), the names do not. The table
 * holds the errnos the verbs of libibverbs and Apple's librdma are known to
 * return; ENOTSUP reads as EOPNOTSUPP (Darwin numbers them apart, Linux not).
 */
#ifndef MR_ERRNAME_H
#define MR_ERRNAME_H

#include "common/compat.h"

/* "EBUSY" for EBUSY; "E?" for a value not in the table. */
const char *mr_errno_name(int e);
/* EBUSY for "EBUSY"; -1 for a name not in the table. */
int mr_errno_from_name(const char *name);

#endif
