/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * <asm/byteorder.h> for the tc program, found before the arch's own (crates/ebpf/build.rs puts
 * this directory first on the include path).
 *
 * Why: the bit-field order of the uapi headers' struct iphdr (ihl, version) and struct tcphdr
 * (doff, syn, ack, ...) comes from <asm/byteorder.h>, which belongs to whichever arch's headers
 * are at hand, not to the BPF object being built. The build host's (Debian's x86 headers) always
 * say little-endian, which is wrong for a big-endian object (-target bpfeb, for MIPS or PowerPC
 * routers); OpenWrt's bpf-headers are MIPS headers, whose byteorder.h needs __MIPSEB__ or
 * __MIPSEL__, which no BPF target defines. The compiler's own byte order is the one that counts.
 */
#ifndef SLIPSTREAM_BPF_ASM_BYTEORDER_H
#define SLIPSTREAM_BPF_ASM_BYTEORDER_H

#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#include <linux/byteorder/big_endian.h>
#elif __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#include <linux/byteorder/little_endian.h>
#else
#error "the compiler defines neither byte order"
#endif

#if defined(__BIG_ENDIAN_BITFIELD) == defined(__LITTLE_ENDIAN_BITFIELD) || \
	defined(__BIG_ENDIAN_BITFIELD) != (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
#error "the uapi headers' bit-field order disagrees with the BPF target's byte order"
#endif

#endif
