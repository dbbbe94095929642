/*
 * le.h - little-endian field access for the wire formats of src/coll (ring hello
 * and frames, the jaccl side channel and QP exchange, the nccl id bootstrap).
 * Byte by byte, so any alignment and any host byte order work.
 */
#ifndef MR_COLL_LE_H
#define MR_COLL_LE_H

#include "common/compat.h"

static inline void mr_put_le16(unsigned char *p, unsigned v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static inline void mr_put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline void mr_put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline unsigned mr_get_le16(const unsigned char *p)
{
	return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static inline uint32_t mr_get_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t mr_get_le64(const unsigned char *p)
{
	return (uint64_t)mr_get_le32(p) | (uint64_t)mr_get_le32(p + 4) << 32;
}

#endif
