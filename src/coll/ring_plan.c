#include "common/compat.h"
#include "coll/ring.h"

static size_t ceil_div(size_t a, size_t b)
{
	return a / b + (a % b != 0);
}

void mr_ring_layout_init(struct mr_ring_layout *l, int size, size_t total, size_t seg,
			 size_t esz, int maxchan)
{
	memset(l, 0, sizeof(*l));
	l->size = size;
	l->total = total;
	l->seg = seg ? seg : ceil_div(total, (size_t)size);
	size_t segbytes = l->seg * esz;
	size_t nchan = segbytes / MR_RING_MIN_CHAN_BYTES;
	if (nchan < 1)
		nchan = 1;
	if (nchan > (size_t)maxchan)
		nchan = (size_t)maxchan;
	if (nchan > MR_RING_MAX_CHAN)
		nchan = MR_RING_MAX_CHAN;
	l->nchan = (int)nchan;
	l->sub = ceil_div(l->seg ? l->seg : 1, nchan);
	bool pair = size == 2;
	size_t pkbytes = l->sub * esz / (pair ? MR_RING_PAIR_PKT_DIV : 4);
	pkbytes = MR_MAX(pkbytes, (size_t)(pair ? MR_RING_PAIR_PKT_MIN : MR_RING_PKT_MIN));
	pkbytes = MR_MIN(pkbytes, (size_t)MR_RING_PKT_MAX);
	l->pk = MR_MAX((size_t)1, MR_MIN(l->sub, pkbytes / esz));
	l->npk = ceil_div(l->sub, l->pk);
}

size_t mr_ring_small_limit(int size)
{
	if (size == 4)
		return MR_RING_SMALL_FOUR;
	if (size < 2)
		return 0;
	return MR_MAX((size_t)MR_RING_SMALL_BYTES, (size_t)MR_RING_SMALL_RECV / (size_t)(size - 1));
}

bool mr_ring_pair_opened(int rank, int dir)
{
	return (rank == 0) == (dir > 0);
}

int mr_ring_seg(int rank, int size, int dir, int step, bool recv)
{
	long s = (long)step + (recv ? 2 : 1);
	long k = ((long)rank + dir * (s % size)) % size;

	return (int)(k < 0 ? k + size : k);
}

void mr_ring_packet(const struct mr_ring_layout *l, int k, int c, size_t j, size_t *off,
		    size_t *len)
{
	size_t seg_start = (size_t)k * l->seg;
	size_t seg_len = seg_start >= l->total ? 0 : MR_MIN(l->seg, l->total - seg_start);
	size_t a = (size_t)c * l->sub + j * l->pk;
	size_t b = MR_MIN(a + l->pk, (size_t)(c + 1) * l->sub);

	a = MR_MIN(a, seg_len);
	b = MR_MIN(b, seg_len);
	*off = seg_start + a;
	*len = b - a;
}
