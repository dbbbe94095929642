/*
 * topo_int.h - helpers shared by the files of src/topo (not part of the contract).
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
