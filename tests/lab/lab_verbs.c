/*
 * lab_verbs: a small RC verbs test program for the SoftRoCE lab, for the
 * operations the standard tools of this distribution do not produce:
 *   write_imm  RDMA WRITE WITH IMMEDIATE (client -> server)
 *   send_imm   SEND WITH IMMEDIATE (client -> server)
 *   rnr        SENDs that arrive before the server posts receives: the
 *              server's rxe answers with RNR NAKs, the client retries
 *   send_inv   SEND WITH INVALIDATE of a remotely invalidatable key: the server
 *              allocates a type 2 memory window, binds it to its buffer (BIND_MW
 *              on its QP) and sends the window's R_Key as conn_info.rkey; the
 *              client WRITEs SIZE bytes of 0x5a through it, then SENDs SIZE bytes
 *              with invalidate of that R_Key, then WRITEs 0xa5 through it again,
 *              which must fail with IBV_WC_REM_ACCESS_ERR. The server's receive
 *              must complete with IBV_WC_WITH_INV and the window's R_Key, and its
 *              buffer must hold the first WRITE's bytes, not the second's.
 *              (Userspace verbs has no fast-register work request: a type 2
 *              window is the remotely invalidatable key userspace can make.)
 *   atomic_write  (IBA 1.5) N ATOMIC WRITEs of 8 bytes, value
 *              0x1122334455667700 + i (host byte order, as ibv_wr_atomic_write
 *              copies it) to the server's 8-byte word i; the server checks them.
 *   flush      (IBA 1.5) N times: an RDMA WRITE of SIZE bytes to the server's
 *              slot i, then a FLUSH of that range with global visibility
 *              (IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE); the server's region and QP
 *              allow IBV_ACCESS_FLUSH_GLOBAL; the server checks the data.
 *   flush_denied  (IBA 1.5) as flush, but the server's region lacks
 *              IBV_ACCESS_FLUSH_GLOBAL (its QP allows it): the client's first
 *              FLUSH must fail, and the client prints the status it got; exit 0
 *              when it is IBV_WC_REM_ACCESS_ERR (A19: a FLUSH the R_Key does not
 *              grant is a remote access error).
 *              atomic_write, flush and flush_denied need ibv_wr_flush (rdma-core 56 here) and Linux
 *              6.2+ (the lab's trixie guest: built with -DLAB_VERBS_IBA15).
 *
 *   lab_verbs server OP [-n N] [-s SIZE] [-x] [-g GIDX] [-m MTU] [-p PORT]
 *   lab_verbs client OP HOST [same options]
 *
 * -x: mixed sizes, every second message is 64 bytes (so one run shows both the
 * multi-packet and the single-packet form of an operation).
 *
 * Out of band: one TCP connection (default port 18600); each side sends
 * struct conn_info (own layout, both sides are this program), then one byte
 * 'R' (server: receives posted) and one byte 'D' (done) are exchanged:
 * the server sends 'R' once it is ready for the client's operations, the
 * client sends 'D' once all its work requests completed, the server checks
 * its memory, then answers 'D'. Integers in conn_info are big-endian; addr is
 * the virtual address of the server's buffer, rkey its R_Key (send_inv: the
 * window's). Exit status 0 when every work request completed as expected
 * and every check passed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn_info {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint64_t addr;
	uint8_t gid[16];
} __attribute__((packed));

enum op { OP_WRITE_IMM, OP_SEND_IMM, OP_RNR, OP_SEND_INV, OP_ATOMIC_WRITE, OP_FLUSH, OP_FLUSH_DENIED };

static const char *const op_names[] = { "write_imm", "send_imm", "rnr", "send_inv", "atomic_write", "flush",
					"flush_denied" };

/* The kernel's IB_WC_WITH_INVALIDATE, as rdma_rxe reports it to userspace (see server_checks). */
#define RXE_WC_WITH_INVALIDATE (1 << 2)

/* The value ATOMIC WRITE i writes. */
static uint64_t aw_value(int i)
{
	return 0x1122334455667700ULL + (uint64_t)i;
}

static void die(const char *what)
{
	fprintf(stderr, "lab_verbs: %s%s%s\n", what, errno ? ": " : "", errno ? strerror(errno) : "");
	exit(1);
}

static void xfer(int fd, void *buf, size_t len, int send_it)
{
	size_t done = 0;
	while (done < len) {
		ssize_t r = send_it ? write(fd, (char *)buf + done, len - done)
				    : read(fd, (char *)buf + done, len - done);
		if (r <= 0)
			die(send_it ? "tcp write" : "tcp read (peer gone?)");
		done += (size_t)r;
	}
}

static int tcp_server(const char *port)
{
	int one = 1, zero = 0, ls, fd;
	struct sockaddr_in6 a;
	ls = socket(AF_INET6, SOCK_STREAM, 0);
	if (ls < 0)
		die("socket");
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	memset(&a, 0, sizeof(a));
	a.sin6_family = AF_INET6;
	a.sin6_addr = in6addr_any;
	a.sin6_port = htons((uint16_t)atoi(port));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1))
		die("bind/listen");
	printf("listening on port %s\n", port);
	fflush(stdout);
	fd = accept(ls, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(ls);
	return fd;
}

static int tcp_client(const char *host, const char *port)
{
	struct addrinfo hints, *res, *ai;
	int fd = -1, tries;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res))
		die("getaddrinfo");
	for (tries = 0; tries < 50 && fd < 0; tries++) {
		for (ai = res; ai; ai = ai->ai_next) {
			fd = socket(ai->ai_family, ai->ai_socktype, 0);
			if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
				break;
			if (fd >= 0)
				close(fd);
			fd = -1;
		}
		if (fd < 0)
			usleep(200000); /* server not listening yet: retry */
	}
	freeaddrinfo(res);
	if (fd < 0)
		die("connect");
	return fd;
}

static enum ibv_mtu mtu_enum(int mtu)
{
	switch (mtu) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	default: return IBV_MTU_1024;
	}
}

static void wait_cq(struct ibv_cq *cq, int n, const char *what, enum op op, int check_imm)
{
	struct ibv_wc wc;
	int got = 0;
	time_t t0 = time(NULL);
	while (got < n) {
		int r = ibv_poll_cq(cq, 1, &wc);
		if (r < 0)
			die("ibv_poll_cq");
		if (r == 0) {
			if (time(NULL) - t0 > 60) {
				fprintf(stderr, "lab_verbs: %s: only %d of %d completions in 60 s\n", what, got, n);
				exit(1);
			}
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "lab_verbs: %s completion %d: %s (vendor_err 0x%x)\n", what, got,
				ibv_wc_status_str(wc.status), wc.vendor_err);
			exit(1);
		}
		if (check_imm) {
			uint32_t want = 0x1000 + (uint32_t)got;
			if (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != want) {
				fprintf(stderr, "lab_verbs: completion %d: immediate 0x%x, expected 0x%x\n", got,
					ntohl(wc.imm_data), want);
				exit(1);
			}
			if (op == OP_WRITE_IMM && wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
				fprintf(stderr, "lab_verbs: completion %d: opcode %d, expected RECV_RDMA_WITH_IMM\n",
					got, wc.opcode);
				exit(1);
			}
		}
		got++;
	}
}

static int mixed;
static int msg_len(int i, int size)
{
	return (mixed && (i & 1) && size > 64) ? 64 : size;
}

static void usage(void)
{
	fprintf(stderr, "usage: lab_verbs server|client write_imm|send_imm|rnr|send_inv|atomic_write|flush|flush_denied "
			"[HOST] [-n N] [-s SIZE] [-x] [-g GIDX] [-m MTU] [-p PORT]\n");
	exit(2);
}

/* One completion, whatever its status, within 60 s. */
static struct ibv_wc one_wc(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;
	time_t t0 = time(NULL);
	for (;;) {
		int r = ibv_poll_cq(cq, 1, &wc);
		if (r < 0)
			die("ibv_poll_cq");
		if (r == 1)
			return wc;
		if (time(NULL) - t0 > 60) {
			fprintf(stderr, "lab_verbs: %s: no completion in 60 s\n", what);
			exit(1);
		}
	}
}

static void expect_success(struct ibv_wc *wc, const char *what, int opcode)
{
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "lab_verbs: %s completion: %s (vendor_err 0x%x)\n", what, ibv_wc_status_str(wc->status),
			wc->vendor_err);
		exit(1);
	}
	if (opcode >= 0 && (int)wc->opcode != opcode) {
		fprintf(stderr, "lab_verbs: %s completion: opcode %d, expected %d\n", what, wc->opcode, opcode);
		exit(1);
	}
}

static void post1(struct ibv_qp *qp, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad;
	if (ibv_post_send(qp, wr, &bad))
		die(what);
}

#ifdef LAB_VERBS_IBA15
/* One ibv_qp_ex work request: RDMA WRITE of local bytes, ATOMIC WRITE of 8 bytes, or FLUSH. */
static void post_ex(struct ibv_qp *qp, enum ibv_wr_opcode opcode, uint64_t wr_id, uint32_t rkey, uint64_t raddr,
		    struct ibv_mr *mr, void *local, uint32_t len)
{
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	if (!qpx)
		die("ibv_qp_to_qp_ex");
	ibv_wr_start(qpx);
	qpx->wr_id = wr_id;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	if (opcode == IBV_WR_RDMA_WRITE) {
		ibv_wr_rdma_write(qpx, rkey, raddr);
		ibv_wr_set_sge(qpx, mr->lkey, (uint64_t)(uintptr_t)local, len);
	} else if (opcode == IBV_WR_ATOMIC_WRITE) {
		ibv_wr_atomic_write(qpx, rkey, raddr, local); /* the 8 bytes are copied here */
	} else {
		ibv_wr_flush(qpx, rkey, raddr, len, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
	}
	if (ibv_wr_complete(qpx))
		die("ibv_wr_complete");
}
#endif

/* RDMA WRITE of sge->length bytes at local through wr (a SEND work request made ready by
 * the caller), and its completion. */
static struct ibv_wc rdma_write(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr, struct ibv_sge *sge,
				char *local, uint64_t raddr, uint32_t rkey, uint64_t wr_id, const char *what)
{
	sge->addr = (uintptr_t)local;
	wr->wr_id = wr_id;
	wr->opcode = IBV_WR_RDMA_WRITE;
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
	post1(qp, wr, what);
	return one_wc(cq, what);
}

/* The client's side of send_inv, atomic_write, flush and flush_denied. */
static void client_ops(enum op op, struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, char *buf, int n,
		       int size, int fd, struct conn_info *peer)
{
	uint32_t rkey = ntohl(peer->rkey);
	uint64_t raddr = be64toh(peer->addr);
	struct ibv_wc wc;
	char byte;
	int i;

#ifndef LAB_VERBS_IBA15
	(void)n, (void)i; /* used by the IBA 1.5 ops only */
#endif
	xfer(fd, &byte, 1, 0); /* 'R' */
	if (op == OP_SEND_INV) {
		struct ibv_send_wr wr;
		struct ibv_sge sge;
		memset(buf, 0x5a, (size_t)size);
		memset(buf + size, 0x3c, (size_t)size);
		sge.lkey = mr->lkey;
		sge.length = (uint32_t)size;
		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		/* 1: the window's key works */
		wc = rdma_write(qp, cq, &wr, &sge, buf, raddr, rkey, 1, "RDMA_WRITE through the window");
		expect_success(&wc, "RDMA_WRITE through the window", IBV_WC_RDMA_WRITE);
		/* 2: SEND with invalidate of it */
		sge.addr = (uintptr_t)(buf + size);
		wr.wr_id = 2;
		wr.opcode = IBV_WR_SEND_WITH_INV;
		wr.invalidate_rkey = rkey;
		post1(qp, &wr, "ibv_post_send (SEND_WITH_INV)");
		wc = one_wc(cq, "SEND_WITH_INV");
		expect_success(&wc, "SEND_WITH_INV", IBV_WC_SEND);
		/* 3: the key no longer works */
		memset(buf, 0xa5, (size_t)size);
		wc = rdma_write(qp, cq, &wr, &sge, buf, raddr, rkey, 3, "RDMA_WRITE after the invalidation");
		printf("RDMA_WRITE with R_Key 0x%08x after SEND_WITH_INV: %s\n", rkey, ibv_wc_status_str(wc.status));
		if (wc.status != IBV_WC_REM_ACCESS_ERR) {
			fprintf(stderr, "lab_verbs: the WRITE with the invalidated R_Key 0x%08x completed with %s, "
					"expected remote access error\n", rkey, ibv_wc_status_str(wc.status));
			exit(1);
		}
		printf("WRITE, SEND_WITH_INV of R_Key 0x%08x, WRITE refused: as expected\n", rkey);
	}
#ifdef LAB_VERBS_IBA15
	else if (op == OP_ATOMIC_WRITE) {
		for (i = 0; i < n; i++) {
			uint64_t v = aw_value(i);
			post_ex(qp, IBV_WR_ATOMIC_WRITE, (uint64_t)i, rkey, raddr + 8 * (uint64_t)i, mr, &v, 8);
		}
		for (i = 0; i < n; i++) {
			wc = one_wc(cq, "ATOMIC_WRITE");
			expect_success(&wc, "ATOMIC_WRITE", IBV_WC_ATOMIC_WRITE);
		}
		printf("%d ATOMIC_WRITE work requests completed\n", n);
	} else {
		int slots = op == OP_FLUSH_DENIED ? 1 : n;
		for (i = 0; i < slots * size; i++)
			buf[i] = (char)(i / size + 1);
		for (i = 0; i < slots; i++) {
			uint64_t at = raddr + (uint64_t)i * (uint64_t)size;
			post_ex(qp, IBV_WR_RDMA_WRITE, 2 * (uint64_t)i, rkey, at, mr, buf + (size_t)i * (size_t)size,
				(uint32_t)size);
			post_ex(qp, IBV_WR_FLUSH, 2 * (uint64_t)i + 1, rkey, at, mr, NULL, (uint32_t)size);
		}
		for (i = 0; i < slots; i++) {
			wc = one_wc(cq, "RDMA_WRITE");
			expect_success(&wc, "RDMA_WRITE", IBV_WC_RDMA_WRITE);
			wc = one_wc(cq, "FLUSH");
			if (op == OP_FLUSH_DENIED) {
				printf("FLUSH to a region without IBV_ACCESS_FLUSH_GLOBAL: %s (opcode %d, vendor_err 0x%x)\n",
				       ibv_wc_status_str(wc.status), wc.opcode, wc.vendor_err);
				if (wc.status != IBV_WC_REM_ACCESS_ERR) {
					fprintf(stderr, "lab_verbs: FLUSH without flush rights completed with %s, "
							"expected remote access error\n", ibv_wc_status_str(wc.status));
					exit(1);
				}
			} else {
				expect_success(&wc, "FLUSH", IBV_WC_FLUSH);
			}
		}
		if (op == OP_FLUSH)
			printf("%d RDMA_WRITE + FLUSH (global visibility) pairs completed\n", n);
	}
#endif
	byte = 'D';
	xfer(fd, &byte, 1, 1);
	xfer(fd, &byte, 1, 0);
}

/* The server's side of send_inv, atomic_write, flush and flush_denied. */
static void server_checks(enum op op, struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, char *buf, int n,
			  int size, int fd, uint32_t rkey)
{
	char byte;
	int i;
	if (op == OP_SEND_INV) {
		struct ibv_recv_wr rwr, *bad;
		struct ibv_sge sge;
		struct ibv_wc wc;
		sge.addr = (uintptr_t)(buf + size);
		sge.length = (uint32_t)size;
		sge.lkey = mr->lkey;
		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = 7;
		rwr.sg_list = &sge;
		rwr.num_sge = 1;
		if (ibv_post_recv(qp, &rwr, &bad))
			die("ibv_post_recv");
		byte = 'R';
		xfer(fd, &byte, 1, 1);
		wc = one_wc(cq, "receive of SEND_WITH_INV");
		expect_success(&wc, "receive of SEND_WITH_INV", IBV_WC_RECV);
		/* rdma_rxe (6.12) writes the kernel's IB_WC_WITH_INVALIDATE (1 << 2) into the CQ its
		 * provider hands out as it is, where libibverbs reads IBV_WC_IP_CSUM_OK; its
		 * IBV_WC_WITH_INV is 1 << 3. Either says "invalidated"; the key must be the window's. */
		if (!(wc.wc_flags & (IBV_WC_WITH_INV | RXE_WC_WITH_INVALIDATE)) || wc.invalidated_rkey != rkey) {
			fprintf(stderr, "lab_verbs: receive: wc_flags 0x%x, invalidated R_Key 0x%08x; expected "
					"IBV_WC_WITH_INV and 0x%08x\n", wc.wc_flags, wc.invalidated_rkey, rkey);
			exit(1);
		}
		if (!(wc.wc_flags & IBV_WC_WITH_INV))
			printf("note: wc_flags 0x%x: the invalidation flagged with the kernel's IB_WC_WITH_INVALIDATE "
			       "(0x4, libibverbs' IBV_WC_IP_CSUM_OK), not IBV_WC_WITH_INV (0x8)\n", wc.wc_flags);
		if (wc.byte_len != (uint32_t)size) {
			fprintf(stderr, "lab_verbs: receive of %u bytes, expected %d\n", wc.byte_len, size);
			exit(1);
		}
		printf("receive completed, invalidated R_Key 0x%08x\n", wc.invalidated_rkey);
		fflush(stdout);
		xfer(fd, &byte, 1, 0); /* 'D': the client's last WRITE has completed */
		for (i = 0; i < size; i++)
			if ((unsigned char)buf[i] != 0x5a || (unsigned char)buf[size + i] != 0x3c) {
				fprintf(stderr, "lab_verbs: byte %d: 0x%02x (window) / 0x%02x (receive), expected 0x5a / "
						"0x3c: %s\n", i, (unsigned char)buf[i], (unsigned char)buf[size + i],
					(unsigned char)buf[i] == 0xa5 ? "the WRITE after the invalidation landed" : "");
				exit(1);
			}
		printf("window holds the first WRITE's bytes, none of the refused one's\n");
	} else {
		byte = 'R';
		xfer(fd, &byte, 1, 1);
		xfer(fd, &byte, 1, 0); /* 'D' */
		if (op == OP_ATOMIC_WRITE) {
			for (i = 0; i < n; i++) {
				uint64_t v;
				memcpy(&v, buf + 8 * i, 8);
				if (v != aw_value(i)) {
					fprintf(stderr, "lab_verbs: word %d is 0x%016llx, expected 0x%016llx\n", i,
						(unsigned long long)v, (unsigned long long)aw_value(i));
					exit(1);
				}
			}
			printf("%d words written by ATOMIC_WRITE, each as expected\n", n);
		} else {
			int slots = op == OP_FLUSH_DENIED ? 1 : n;
			for (i = 0; i < slots * size; i++)
				if ((unsigned char)buf[i] != (unsigned char)(i / size + 1)) {
					fprintf(stderr, "lab_verbs: byte %d differs from what the client wrote\n", i);
					exit(1);
				}
			printf("%d slots written and flushed, data as expected\n", slots);
		}
	}
	byte = 'D';
	xfer(fd, &byte, 1, 1);
}

int main(int argc, char **argv)
{
	int n = 5, size = 64, gidx = 1, mtu = 1024, is_server, i, fd, iba15;
	int mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	int qp_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	size_t buf_len;
	struct ibv_mw *mw = NULL;
	const char *port = "18600", *host = NULL;
	enum op op;
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct conn_info me, peer;
	union ibv_gid gid;
	char *buf, byte;

	if (argc < 3)
		usage();
	is_server = !strcmp(argv[1], "server");
	if (!is_server && strcmp(argv[1], "client"))
		usage();
	for (op = OP_WRITE_IMM; op <= OP_FLUSH_DENIED; op++)
		if (!strcmp(argv[2], op_names[op]))
			break;
	if (op > OP_FLUSH_DENIED)
		usage();
	iba15 = op == OP_ATOMIC_WRITE || op == OP_FLUSH || op == OP_FLUSH_DENIED;
#ifndef LAB_VERBS_IBA15
	if (iba15) {
		fprintf(stderr, "lab_verbs: %s needs Linux 6.2+ and ibv_wr_flush (rdma-core 56 here): this build has none "
				"(use the lab's trixie guest, ROCE_LAB_GUEST=trixie)\n", op_names[op]);
		exit(2);
	}
#endif
	i = 3;
	if (!is_server) {
		if (argc < 4)
			usage();
		host = argv[i++];
	}
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "-x")) {
			mixed = 1;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "-n"))
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-s"))
			size = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-g"))
			gidx = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-m"))
			mtu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-p"))
			port = argv[++i];
		else
			usage();
	}
	if (n < 1 || n > 1000 || size < 1 || size > (1 << 20))
		usage();
	if (op == OP_ATOMIC_WRITE)
		size = 8; /* one aligned word each */
	if (op == OP_SEND_INV)
		n = 2; /* slot 0 behind the window, slot 1 for the receive */
#ifdef LAB_VERBS_IBA15
	if (op == OP_FLUSH)
		mr_access |= IBV_ACCESS_FLUSH_GLOBAL;
	if (op == OP_FLUSH || op == OP_FLUSH_DENIED)
		qp_access |= IBV_ACCESS_FLUSH_GLOBAL;
#endif
	if (op == OP_SEND_INV)
		mr_access |= IBV_ACCESS_MW_BIND;
	buf_len = (size_t)n * (size_t)size;

	devs = ibv_get_device_list(NULL);
	if (!devs || !devs[0])
		die("no RDMA device");
	ctx = ibv_open_device(devs[0]);
	if (!ctx)
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 2 * n + 8, NULL, NULL, 0);
	buf = aligned_alloc(4096, (buf_len + 4095) & ~(size_t)4095);
	if (!pd || !cq || !buf)
		die("pd/cq/buffer");
	memset(buf, 0, buf_len);
	mr = ibv_reg_mr(pd, buf, buf_len, mr_access);
	if (!mr)
		die("ibv_reg_mr");
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = (uint32_t)(2 * n + 4);
	ia.cap.max_recv_wr = (uint32_t)n;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	if (iba15) {
#ifdef LAB_VERBS_IBA15
		/* ATOMIC WRITE and FLUSH exist only as ibv_qp_ex work requests */
		struct ibv_qp_init_attr_ex iax;
		memset(&iax, 0, sizeof(iax));
		iax.send_cq = cq;
		iax.recv_cq = cq;
		iax.qp_type = IBV_QPT_RC;
		iax.cap = ia.cap;
		iax.pd = pd;
		iax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		iax.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_FLUSH;
		qp = ibv_create_qp_ex(ctx, &iax);
		if (!qp)
			die("ibv_create_qp_ex (ATOMIC_WRITE, FLUSH)");
#endif
	} else {
		qp = ibv_create_qp(pd, &ia);
		if (!qp)
			die("ibv_create_qp");
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = (unsigned)qp_access;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify QP to INIT");
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		die("ibv_query_gid");

	srand48(getpid() ^ time(NULL));
	memset(&me, 0, sizeof(me));
	me.qpn = htonl(qp->qp_num);
	me.psn = htonl((uint32_t)lrand48() & 0xffffff);
	me.rkey = htonl(mr->rkey);
	me.addr = htobe64((uint64_t)(uintptr_t)buf);
	memcpy(me.gid, gid.raw, 16);
	if (op == OP_SEND_INV && is_server) {
		mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
		if (!mw)
			die("ibv_alloc_mw (type 2)");
	}
	fd = is_server ? tcp_server(port) : tcp_client(host, port);
	/* the server's conn_info waits for its window: the QP must be in RTS to bind it */
	if (!mw)
		xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &peer, sizeof(peer), 0);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu_enum(mtu);
	a.dest_qp_num = ntohl(peer.qpn);
	a.rq_psn = ntohl(peer.psn);
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 14; /* 1.28 ms: the RNR NAK's timer field */
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)gidx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify QP to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = ntohl(me.psn);
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify QP to RTS");
	if (mw) {
		/* BIND_MW of the type 2 window over the whole buffer, under its next key */
		struct ibv_send_wr bwr;
		struct ibv_wc wc;
		memset(&bwr, 0, sizeof(bwr));
		bwr.wr_id = 100;
		bwr.opcode = IBV_WR_BIND_MW;
		bwr.send_flags = IBV_SEND_SIGNALED;
		bwr.bind_mw.mw = mw;
		bwr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
		bwr.bind_mw.bind_info.mr = mr;
		bwr.bind_mw.bind_info.addr = (uint64_t)(uintptr_t)buf;
		bwr.bind_mw.bind_info.length = (uint64_t)size;
		bwr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		post1(qp, &bwr, "ibv_post_send (BIND_MW)");
		wc = one_wc(cq, "BIND_MW");
		expect_success(&wc, "BIND_MW", IBV_WC_BIND_MW);
		me.rkey = htonl(bwr.bind_mw.rkey);
		printf("type 2 window bound: R_Key 0x%08x over %d bytes (region's R_Key 0x%08x)\n", bwr.bind_mw.rkey,
		       size, mr->rkey);
		xfer(fd, &me, sizeof(me), 1);
	}
	printf("local QPN 0x%06x PSN 0x%06x, remote QPN 0x%06x PSN 0x%06x\n", qp->qp_num, ntohl(me.psn),
	       ntohl(peer.qpn), ntohl(peer.psn));
	fflush(stdout);

	if (op >= OP_SEND_INV) {
		if (is_server)
			server_checks(op, qp, cq, mr, buf, n, size, fd, ntohl(me.rkey));
		else
			client_ops(op, qp, cq, mr, buf, n, size, fd, &peer);
	} else if (is_server) {
		struct ibv_recv_wr rwr, *bad;
		struct ibv_sge sge;
		if (op == OP_RNR) {
			/* let the client's SENDs arrive while no receive is posted */
			byte = 'R';
			xfer(fd, &byte, 1, 1);
			usleep(300000);
		}
		for (i = 0; i < n; i++) {
			sge.addr = (uintptr_t)(buf + (size_t)i * (size_t)size);
			sge.length = (uint32_t)size;
			sge.lkey = mr->lkey;
			memset(&rwr, 0, sizeof(rwr));
			rwr.wr_id = (uint64_t)i;
			rwr.sg_list = &sge;
			rwr.num_sge = op == OP_WRITE_IMM ? 0 : 1;
			if (ibv_post_recv(qp, &rwr, &bad))
				die("ibv_post_recv");
		}
		if (op != OP_RNR) {
			byte = 'R';
			xfer(fd, &byte, 1, 1);
		}
		wait_cq(cq, n, "receive", op, op != OP_RNR);
		for (i = 0; i < n; i++)
			for (int j = 0; j < msg_len(i, size); j++)
				if ((unsigned char)buf[i * size + j] != (unsigned char)(i + 1))
					die("received data differs from what the client sent");
		printf("%d receives completed, data and immediates as expected\n", n);
	} else {
		struct ibv_send_wr swr, *bad;
		struct ibv_sge sge;
		xfer(fd, &byte, 1, 0); /* 'R' */
		for (i = 0; i < n * size; i++)
			buf[i] = (char)(i / size + 1);
		for (i = 0; i < n; i++) {
			sge.addr = (uintptr_t)(buf + (size_t)i * (size_t)size);
			sge.length = (uint32_t)msg_len(i, size);
			sge.lkey = mr->lkey;
			memset(&swr, 0, sizeof(swr));
			swr.wr_id = (uint64_t)i;
			swr.sg_list = &sge;
			swr.num_sge = 1;
			swr.send_flags = IBV_SEND_SIGNALED;
			if (op == OP_WRITE_IMM) {
				swr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
				swr.wr.rdma.remote_addr = be64toh(peer.addr) + (uint64_t)i * (uint64_t)size;
				swr.wr.rdma.rkey = ntohl(peer.rkey);
			} else {
				swr.opcode = op == OP_SEND_IMM ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
			}
			swr.imm_data = htonl(0x1000 + (uint32_t)i);
			if (ibv_post_send(qp, &swr, &bad))
				die("ibv_post_send");
		}
		wait_cq(cq, n, "send", op, 0);
		printf("%d %s work requests completed\n", n,
		       op == OP_WRITE_IMM ? "RDMA_WRITE_WITH_IMM" : op == OP_SEND_IMM ? "SEND_WITH_IMM" : "SEND");
	}
	if (op < OP_SEND_INV) {
		byte = 'D';
		xfer(fd, &byte, 1, 1);
		xfer(fd, &byte, 1, 0);
	}
	close(fd);
	ibv_destroy_qp(qp);
	if (mw)
		ibv_dealloc_mw(mw);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	return 0;
}
