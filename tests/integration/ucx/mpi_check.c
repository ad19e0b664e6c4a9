/* An MPI program that checks every byte it moves: what the UCX tests run with
 * mpirun (tests/integration/ucx/run_mpi.sh) over uroce.
 *
 *   1. ping-pong: rank 0 with every other rank in turn, messages of 1 B to
 *      1 MiB; the partner checks each message and answers a transformed copy,
 *      which rank 0 checks;
 *   2. a streamed 1 MiB transfer: every rank sends 1 MiB to the next rank as
 *      64 chunks of 16 KiB posted at once (MPI_Isend), then the whole 1 MiB
 *      as one message, and checks what it received from the previous rank;
 *   3. MPI_Allreduce (MPI_SUM over ints and MPI_MAX over doubles) of 1 to
 *      256 Ki elements;
 *   4. MPI_Alltoall of 1, 1000 and 65536 ints per peer.
 *
 * Every value is a function of (sender, receiver, round, index), so a byte
 * from the wrong message, the wrong sender or the wrong place is caught.
 * Prints one line per check from rank 0 and "mpi_check: PASS (N ranks)";
 * on the first wrong value prints where and calls MPI_Abort (exit 1).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

static void fail(const char *what, long round, long index, long got, long want) {
  fprintf(stderr, "mpi_check: rank %d: %s: round %ld element %ld is %ld, expected %ld\n", rank, what, round,
          index, got, want);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "mpi_check: rank %d: out of memory (%zu bytes)\n", rank, n);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

/* The byte at `i` of message `round` from `src` to `dst`. */
static uint8_t byte_of(int src, int dst, long round, size_t i) {
  uint64_t x = (uint64_t)i * 0x9E3779B1u + (uint64_t)round * 0x85EBCA77u + (uint64_t)src * 131u + (uint64_t)dst;
  return (uint8_t)(x ^ (x >> 13) ^ (x >> 29));
}

static void fill(uint8_t *b, size_t n, int src, int dst, long round) {
  for (size_t i = 0; i < n; ++i) b[i] = byte_of(src, dst, round, i);
}

static void check(const char *what, const uint8_t *b, size_t n, int src, int dst, long round) {
  for (size_t i = 0; i < n; ++i)
    if (b[i] != byte_of(src, dst, round, i)) fail(what, round, (long)i, b[i], byte_of(src, dst, round, i));
}

static void ping_pong(void) {
  const size_t max = 1 << 20;
  uint8_t *buf = xmalloc(max);
  long messages = 0;
  for (int peer = 1; peer < nranks; ++peer) {
    for (size_t size = 1; size <= max; size *= 4) {
      const int iters = size >= 65536 ? 4 : 20;
      for (int it = 0; it < iters; ++it) {
        const long round = (long)size * 100 + it;
        if (rank == 0) {
          fill(buf, size, 0, peer, round);
          MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
          memset(buf, 0, size);
          MPI_Recv(buf, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          check("ping-pong reply", buf, size, peer, 0, round);
          messages += 2;
        } else if (rank == peer) {
          MPI_Status st;
          int count = -1;
          memset(buf, 0, size);
          MPI_Recv(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st);
          MPI_Get_count(&st, MPI_BYTE, &count);
          if (count != (int)size) fail("ping-pong length", round, -1, count, (long)size);
          check("ping-pong request", buf, size, 0, peer, round);
          fill(buf, size, peer, 0, round);
          MPI_Send(buf, (int)size, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (rank == 0) printf("mpi_check: ping-pong: %ld messages of 1 B .. 1 MiB checked\n", messages);
  free(buf);
}

static void stream_1mib(void) {
  const size_t total = 1 << 20, chunk = 16384, chunks = total / chunk;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  uint8_t *out = xmalloc(total), *in = xmalloc(total);
  MPI_Request *req = xmalloc(sizeof(MPI_Request) * 2 * chunks);
  for (long round = 0; round < 3; ++round) {
    fill(out, total, rank, next, round);
    memset(in, 0, total);
    for (size_t c = 0; c < chunks; ++c)
      MPI_Irecv(in + c * chunk, (int)chunk, MPI_BYTE, prev, 10 + (int)c, MPI_COMM_WORLD, &req[c]);
    for (size_t c = 0; c < chunks; ++c)
      MPI_Isend(out + c * chunk, (int)chunk, MPI_BYTE, next, 10 + (int)c, MPI_COMM_WORLD, &req[chunks + c]);
    MPI_Waitall((int)(2 * chunks), req, MPI_STATUSES_IGNORE);
    check("streamed chunks", in, total, prev, rank, round);
  }
  /* The same megabyte as one message (the rendezvous path). */
  fill(out, total, rank, next, 99);
  memset(in, 0, total);
  MPI_Sendrecv(out, (int)total, MPI_BYTE, next, 9, in, (int)total, MPI_BYTE, prev, 9, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  check("1 MiB message", in, total, prev, rank, 99);
  if (rank == 0) printf("mpi_check: stream: 3 x 1 MiB in 64 chunks and 1 x 1 MiB per rank checked\n");
  free(req);
  free(out);
  free(in);
}

static void allreduce(void) {
  const int max = 256 * 1024;
  int *ia = xmalloc(sizeof(int) * max), *ib = xmalloc(sizeof(int) * max);
  double *da = xmalloc(sizeof(double) * max), *db = xmalloc(sizeof(double) * max);
  for (int n = 1; n <= max; n *= 8) {
    for (int i = 0; i < n; ++i) {
      ia[i] = (rank + 1) * (i % 1000 + 1);
      da[i] = (double)((rank * 7919 + i) % nranks) + i * 0.5;
      ib[i] = -1;
      db[i] = -1;
    }
    MPI_Allreduce(ia, ib, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(da, db, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const long ranks_sum = (long)nranks * (nranks + 1) / 2;
    for (int i = 0; i < n; ++i) {
      const long want = ranks_sum * (i % 1000 + 1);
      if (ib[i] != want) fail("allreduce sum", n, i, ib[i], want);
      /* The largest (r * 7919 + i) % nranks over all ranks r is nranks - 1
       * (7919 is prime, so r -> r * 7919 mod nranks is onto when nranks is
       * not a multiple of it). */
      const double dwant = (double)(nranks - 1) + i * 0.5;
      if (db[i] != dwant) fail("allreduce max", n, i, (long)db[i], (long)dwant);
    }
  }
  if (rank == 0) printf("mpi_check: allreduce: sum and max of 1 .. 256 Ki elements checked\n");
  free(ia);
  free(ib);
  free(da);
  free(db);
}

static int a2a_value(int src, int dst, int i) { return src * 1000003 + dst * 7919 + i; }

static void alltoall(void) {
  const int counts[] = {1, 1000, 65536};
  for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
    const int n = counts[k];
    int *out = xmalloc(sizeof(int) * (size_t)n * nranks), *in = xmalloc(sizeof(int) * (size_t)n * nranks);
    for (int d = 0; d < nranks; ++d)
      for (int i = 0; i < n; ++i) out[(size_t)d * n + i] = a2a_value(rank, d, i);
    memset(in, 0xff, sizeof(int) * (size_t)n * nranks);
    MPI_Alltoall(out, n, MPI_INT, in, n, MPI_INT, MPI_COMM_WORLD);
    for (int s = 0; s < nranks; ++s)
      for (int i = 0; i < n; ++i)
        if (in[(size_t)s * n + i] != a2a_value(s, rank, i))
          fail("alltoall", n, (long)s * n + i, in[(size_t)s * n + i], a2a_value(s, rank, i));
    free(out);
    free(in);
  }
  if (rank == 0) printf("mpi_check: alltoall: 1, 1000 and 65536 ints per peer checked\n");
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (nranks < 2) {
    if (rank == 0) fprintf(stderr, "mpi_check: needs at least 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char host[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(host, &len);
  printf("mpi_check: rank %d of %d on %s\n", rank, nranks, host);
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  ping_pong();
  stream_1mib();
  allreduce();
  alltoall();
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("mpi_check: PASS (%d ranks)\n", nranks);
  MPI_Finalize();
  return 0;
}
