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
 *
 * MLX compatibility (topo.h promises it): each step follows
 * ml-explore/mlx python/mlx/_distributed_utils/config.py (mlx.distributed_config):
 *  - extract_connectivity(): one port per bus that has a domain_uuid_key; its
 *    receptacle_1_tag.receptacle_id_key N names the hardware port "Thunderbolt N"
 *    of networksetup; the peer is the first _items entry carrying a
 *    domain_uuid_key; a host's ports are sorted by interface name as strings
 *    ("en10" < "en2"), exactly as MLX's sorted(ports, key=iface);
 *  - IPConfigurator.__init__(): the address plan (order of hosts, ports, cables,
 *    192.168.X.Y counter);
 *  - IPConfigurator.setup(): the per-host commands;
 *  - extract_rings() + check_valid_ring(): the ring MLX picks is the first
 *    Hamiltonian cycle met by a DFS from host 0 visiting neighbours in index
 *    order; our pruned search visits in the same order, so it returns the same
 *    ring (see mr_topo_find_ring() for the one exception);
 *  - configure_ring() / configure_jaccl() /
 *    configure_jaccl_ring(): the hostfiles;
 *  - prepare_tb_hostfile(): the automatic backend choice.
 * Deliberate differences (all "beyond MLX"), which change nothing for a
 * consistent cluster: a cable only one side reports is flagged and not used
 * (MLX counts it one way only); a peer behind a hub or dock (one level deeper
 * in _items) is found; hostile interface names are refused at parse time;
 * /30 ranges already routed on a host are skipped; a host whose cables run at
 * 40 Gb/s is told that Thunderbolt 4 cannot do RDMA.
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
