/*
 * dot.c - the cabling as GraphViz (meshconfig --dot). MLX's
 * tb_connectivity_to_dot() draws hosts and "enA/enB" edges; we add the speed
 * (colour and label) and the cables only one side reports (dashed, red).
 */
#include "common/compat.h"

#include "common/err.h"
#include "topo/topo.h"

/* A DOT string literal: names are validated elsewhere, but quote anyway. */
static int dot_quote(struct mr_buf *b, const char *s)
{
	if (mr_buf_putc(b, '"') < 0)
		return -1;
	for (; *s; s++) {
		if ((*s == '"' || *s == '\\') && mr_buf_putc(b, '\\') < 0)
			return -1;
		if (mr_buf_putc(b, (unsigned char)*s < 0x20 ? ' ' : *s) < 0)
			return -1;
	}
	return mr_buf_putc(b, '"');
}

static const char *speed_colour(unsigned gbps)
{
	if (gbps >= 80)
		return "darkgreen";
	if (gbps >= 40)
		return "darkorange";
	return "gray40";
}

int mr_topo_dot(const struct mr_topo_cluster *c, struct mr_buf *out, struct meshrun_err *err)
{
	int rc = 0;

	if (!c->finished)
		return mr_err_set(err, MESHRUN_E_INVAL, "cluster not finished");
	if (mr_buf_puts(out, "graph G {\n  node [shape=rectangle];\n") < 0)
		goto out_nomem;
	for (size_t i = 0; i < c->nhosts; i++) {
		if (mr_buf_printf(out, "  n%zu [label=", i) < 0 ||
		    dot_quote(out, c->hosts[i].name) < 0 || mr_buf_puts(out, "];\n") < 0)
			goto out_nomem;
	}
	for (size_t k = 0; k < c->ncables; k++) {
		const struct mr_topo_cable *cb = &c->cables[k];
		const struct mr_topo_port *a = &c->hosts[cb->host[0]].ports[cb->port[0]];
		const struct mr_topo_port *b = &c->hosts[cb->host[1]].ports[cb->port[1]];

		/* interface and host names are [A-Za-z0-9_.-] (checked at parse time) */
		if (mr_buf_printf(out, "  n%zu -- n%zu [label=\"%s/%s", cb->host[0], cb->host[1],
				  a->ifname, b->ifname) < 0 ||
		    (cb->speed_gbps && mr_buf_printf(out, "\\n%u Gb/s", cb->speed_gbps) < 0) ||
		    mr_buf_printf(out, "\", color=\"%s\", penwidth=2];\n",
				  speed_colour(cb->speed_gbps)) < 0)
			goto out_nomem;
	}
	for (size_t k = 0; k < c->nonesided; k++) {
		const struct mr_topo_cable *cb = &c->onesided[k];
		const struct mr_topo_port *a = &c->hosts[cb->host[0]].ports[cb->port[0]];
		const struct mr_topo_port *b = &c->hosts[cb->host[1]].ports[cb->port[1]];

		/* both ends, as the warning names them (the reporting host knows the far port) */
		if (mr_buf_printf(out,
				  "  n%zu -- n%zu [label=\"%s/%s\\nreported by %s only\", style=dashed, color=\"red\", fontcolor=\"red\"];\n",
				  cb->host[0], cb->host[1], a->ifname, b->ifname, c->hosts[cb->host[0]].name) < 0)
			goto out_nomem;
	}
	if (mr_buf_puts(out, "}\n") < 0)
		goto out_nomem;
	goto out;
out_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
out:
	return rc;
}
