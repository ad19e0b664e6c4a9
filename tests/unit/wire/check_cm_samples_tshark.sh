#!/usr/bin/env bash
# The codec's CM messages (src/wire/cm_mad.h) judged by Wireshark's own
# dissector: every frame decodes with a good ICRC and nothing malformed
# (../shared/wire/tshark_roce.sh), tshark names each CM message, and the
# fields it decodes from the REQ (with the RDMA CM's IP header), REP, REJ,
# RTU, DREQ and DREP are the values write_cm_samples.cc set (tshark 4.0
# decodes no MRA or SIDR fields: those two are judged by name only). The
# REQ's primary flow label and packet rate are left out: for the bytes
# 12 34 50 03 at message offset 88 (flow label 0x12345 in the first 20 bits,
# rate 3 in the last 6, as the IBTA table and the Linux kernel's
# ibta_vol1_c12.h place them) tshark 4.0 shows 0x123 and 0x12.
# Skips (77) when tshark or the script is not there.
#   check_cm_samples_tshark.sh WIRE_WRITE_CM_SAMPLES SHARED_WIRE_DIR
set -euo pipefail
writer=$1 wire=$2
if [[ ! -x "$wire/tshark_roce.sh" ]] || ! command -v tshark >/dev/null; then
  echo "SKIP: no tshark or no $wire/tshark_roce.sh"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$writer" "$tmp/cm.pcap"
out=$(bash "$wire/tshark_roce.sh" "$tmp/cm.pcap") || {
  echo "$out"
  exit 1
}
echo "$out"
echo "$out" | tail -1 | grep -qx "9 passed, 0 failed" || { echo "FAIL: expected 9 frames passing"; exit 1; }

# field=value per frame, as tshark decodes them
fields=(infiniband.mad.attributeid
  infiniband.cm.req.localqpn infiniband.cm.req.responderres infiniband.cm.req.initdepth
  infiniband.cm.req.remoteresptout infiniband.cm.req.startpsn infiniband.cm.req.localresptout
  infiniband.cm.req.retrcount infiniband.cm.req.pppmtu infiniband.cm.req.rnrretrcount
  infiniband.cm.req.maxcmretr infiniband.cm.req.prim_hoplim infiniband.cm.req.prim_localacktout infiniband.cm.req.serviceid.dport
  infiniband.cm.req.ip_cm.ipv infiniband.cm.req.ip_cm.sport infiniband.cm.req.ip_cm.sip4
  infiniband.cm.req.ip_cm.dip4
  infiniband.cm.rep.localqpn infiniband.cm.rep.startpsn infiniband.cm.rep.respres
  infiniband.cm.rep.initdepth infiniband.cm.rep.tgtackdelay infiniband.cm.rep.rnrretrcount
  infiniband.cm.rep.srq infiniband.cm.rep.remotecommid
  infiniband.cm.rej.reason infiniband.cm.rej.remotecommid
  infiniband.cm.rtu.localcommid infiniband.cm.dreq.remotecommid infiniband.cm.drsp.localcommid)
args=()
for f in "${fields[@]}"; do args+=(-e "$f"); done
tshark -n -r "$tmp/cm.pcap" -o infiniband.rroce.port:4791 -T fields -E separator=, -E occurrence=f \
  "${args[@]}" 2>/dev/null | awk -F, -v names="${fields[*]}" '
  BEGIN { n = split(names, name, " ") }
  { for (i = 1; i <= n; ++i) if ($i != "") printf "%d %s=%s\n", NR, name[i], $i }' >"$tmp/got"

cat >"$tmp/want" <<'WANT'
1 infiniband.mad.attributeid=0x0010
1 infiniband.cm.req.localqpn=0x123456
1 infiniband.cm.req.responderres=0x04
1 infiniband.cm.req.initdepth=0x03
1 infiniband.cm.req.remoteresptout=0x14
1 infiniband.cm.req.startpsn=0xabcdef
1 infiniband.cm.req.localresptout=0x13
1 infiniband.cm.req.retrcount=0x07
1 infiniband.cm.req.pppmtu=0x03
1 infiniband.cm.req.rnrretrcount=0x06
1 infiniband.cm.req.maxcmretr=0x0f
1 infiniband.cm.req.prim_hoplim=0x40
1 infiniband.cm.req.prim_localacktout=0x12
1 infiniband.cm.req.serviceid.dport=0x1d2f
1 infiniband.cm.req.ip_cm.ipv=0x04
1 infiniband.cm.req.ip_cm.sport=0x1234
1 infiniband.cm.req.ip_cm.sip4=10.0.0.1
1 infiniband.cm.req.ip_cm.dip4=10.0.0.2
2 infiniband.mad.attributeid=0x0011
3 infiniband.mad.attributeid=0x0012
3 infiniband.cm.rej.reason=0x001c
3 infiniband.cm.rej.remotecommid=0x11223344
4 infiniband.mad.attributeid=0x0013
4 infiniband.cm.rep.localqpn=0x654321
4 infiniband.cm.rep.startpsn=0x0fedcb
4 infiniband.cm.rep.respres=0x02
4 infiniband.cm.rep.initdepth=0x01
4 infiniband.cm.rep.tgtackdelay=0x11
4 infiniband.cm.rep.rnrretrcount=0x05
4 infiniband.cm.rep.srq=0x01
4 infiniband.cm.rep.remotecommid=0x11223344
5 infiniband.mad.attributeid=0x0014
5 infiniband.cm.rtu.localcommid=0x11223344
6 infiniband.mad.attributeid=0x0015
6 infiniband.cm.dreq.remotecommid=0x55667788
7 infiniband.mad.attributeid=0x0016
7 infiniband.cm.drsp.localcommid=0x55667788
8 infiniband.mad.attributeid=0x0017
9 infiniband.mad.attributeid=0x0018
WANT
if ! diff -u "$tmp/want" "$tmp/got"; then
  echo "FAIL: tshark decodes other values than the codec wrote (- wanted, + decoded)"
  exit 1
fi
echo "PASS: $(wc -l <"$tmp/want") CM fields as tshark decodes them"
