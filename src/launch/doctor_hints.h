/*
 * launch/doctor_hints.h - where meshrun's failure messages point to `meshconfig
 * doctor` (config/doctor.h): the failures one of its checks would have named
 * before the run. Each is a string literal with two "%s" for the doctor's host
 * option and its value ("--hostfile", "hosts.json" or "--hosts", "m1,m2"), so
 * the formats stay checked where they are used (run.c).
 */
#ifndef MR_LAUNCH_DOCTOR_HINTS_H
#define MR_LAUNCH_DOCTOR_HINTS_H

/* a host meshrun cannot reach: doctor's reach check, for every host at once */
#define MR_HINT_DOCTOR_REACH                                                             \
	"'meshconfig doctor %s %s' checks every host at once (ssh, cables, RDMA, the "    \
	"job's ports)"

/* the job's files could not be written there (setup exit 4): a full disk? */
#define MR_HINT_DOCTOR_DISK                                                              \
	"a full disk? 'meshconfig doctor %s %s' checks the free space where every host "  \
	"writes job files"

/* a rank of a job over the network failed */
#define MR_HINT_DOCTOR_RANKS                                                             \
	"ranks that cannot connect (a firewall, macOS's Local Network privacy, a port in " \
	"use, a cable without its address) or RDMA devices without their GID fail this "  \
	"way: 'meshconfig doctor %s %s' checks each before a run"

#endif
