/*
 * topo_int.h - helpers shared by the files of src/topo (not part of the contract).
 *
 * The module's files (topo.h is the contract):
 *   parse.c    one host's command output -> struct mr_topo_host
 *   cluster.c  hosts -> cables and the connectivity matrix
 *   ring.c     a ring through every host (Hamiltonian cycle)
 *   choose.c   mesh? ring? RDMA? -> the backend, as MLX decides it
 *   plan.c     the point-to-point IP plan (one /30 per cable)
 *   hfile.c    the hostfile of the chosen backend, as MLX writes it
 *   dot.c      the cabling as GraphViz
 *   fixture.c  fixture folders in (I/O); gen.c fixture sets out (gen.h)
 */
#ifndef MR_TOPO_INT_H
#define MR_TOPO_INT_H

#include "common/compat.h"
#include "topo/topo.h"

/* mr_is_ifname() and a leading letter or digit (never read as an option). */
bool mr_topo_ifname_ok(const char *s);
char *mr_topo_strdup(const char *s);
/* "80 Gb/s" -> 80; 0 when there is no number before " Gb/s". */
unsigned mr_topo_parse_speed(const char *s);
void mr_topo_port_release(struct mr_topo_port *p);

#endif
