/*
 * lab_verbs: a small RC verbs test program for the SoftRoCE lab, for the
 * operations the standard tools of this distribution do not produce:
 *   write_imm  RDMA WRITE WITH IMMEDIATE (client -> server)
 *   send_imm   SEND WITH IMMEDIATE (client -> server)
 *   rnr        SENDs that arrive before the server posts receives: the
 *              server's rxe answers with RNR NAKs, the client retries
 *
 *   lab_verbs server OP [-n N] [-s SIZE] [-x] [-g GIDX] [-m MTU] [-p PORT]
 *   lab_verbs client OP HOST [same options]
 *
 * -x: mixed sizes, every second message is 64 bytes (so one run shows both the
 * multi-packet and the single-packet form of an operation).
 *
 * Out of band: one TCP connection (default port 18600); each side sends
 * struct conn_info (own layout, both sides are this program), then one byte
 * 'R' (server: receives posted) and one byte 'D' (done) are exchanged.
 * Exit status 0 when every work request completed successfully and every
 * received immediate value was the expected one.
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

enum op { OP_WRITE_IMM, OP_SEND_IMM, OP_RNR };

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
	fprintf(stderr, "usage: lab_verbs server|client write_imm|send_imm|rnr [HOST] "
			"[-n N] [-s SIZE] [-x] [-g GIDX] [-m MTU] [-p PORT]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int n = 5, size = 64, gidx = 1, mtu = 1024, is_server, i, fd;
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
	if (!strcmp(argv[2], "write_imm"))
		op = OP_WRITE_IMM;
	else if (!strcmp(argv[2], "send_imm"))
		op = OP_SEND_IMM;
	else if (!strcmp(argv[2], "rnr"))
		op = OP_RNR;
	else
		usage();
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

	devs = ibv_get_device_list(NULL);
	if (!devs || !devs[0])
		die("no RDMA device");
	ctx = ibv_open_device(devs[0]);
	if (!ctx)
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 2 * n + 4, NULL, NULL, 0);
	buf = calloc((size_t)n, (size_t)size);
	if (!pd || !cq || !buf)
		die("pd/cq/buffer");
	mr = ibv_reg_mr(pd, buf, (size_t)n * (size_t)size,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("ibv_reg_mr");
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = (uint32_t)n;
	ia.cap.max_recv_wr = (uint32_t)n;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
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
	fd = is_server ? tcp_server(port) : tcp_client(host, port);
	xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &peer, sizeof(peer), 0);
	printf("local QPN 0x%06x PSN 0x%06x, remote QPN 0x%06x PSN 0x%06x\n", qp->qp_num, ntohl(me.psn),
	       ntohl(peer.qpn), ntohl(peer.psn));

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

	if (is_server) {
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
	byte = 'D';
	xfer(fd, &byte, 1, 1);
	xfer(fd, &byte, 1, 0);
	close(fd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	return 0;
}
