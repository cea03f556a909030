#!/usr/bin/env bash
# Makes a development certificate authority and the certificates podscope's daemons need, with
# openssl. For trying podscope and for tests; production certificates come from your own CA.
#
#   scripts/dev-certs.sh DIR [--coordinator-name NAME]... [--agent ID]... [--expired-agent ID]...
#                            [--days N]
#
# Writes into DIR (keys are mode 600; an existing DIR/ca.pem and ca.key are reused, so that
# certificates made later chain to the same CA):
#   ca.pem, ca.key                 the CA (give ca.pem to every daemon's --tls-ca and the CLI's --ca-cert)
#   coordinator.pem, .key          the coordinator's certificate, for serving only; its names
#                                  are the --coordinator-name values (default: localhost, 127.0.0.1;
#                                  an existing one is kept unless names are given)
#   agent-ID.pem, agent-ID.key     an agent's certificate; its identity (CN) is the agent id
#   (--expired-agent makes one that expired yesterday, for tests)
set -euo pipefail

usage() {
  sed -n '4,5p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 1 ] || usage
DIR="$1"
shift
NAMES=()
AGENTS=()
EXPIRED=()
DAYS=365
while [ $# -gt 0 ]; do
  case "$1" in
    --coordinator-name) NAMES+=("${2:?--coordinator-name needs a value}"); shift 2 ;;
    --agent) AGENTS+=("${2:?--agent needs a value}"); shift 2 ;;
    --expired-agent) EXPIRED+=("${2:?--expired-agent needs a value}"); shift 2 ;;
    --days) DAYS="${2:?--days needs a value}"; shift 2 ;;
    *) echo "dev-certs.sh: unknown argument \"$1\"" >&2; usage ;;
  esac
done
# The coordinator's certificate is (re)made when names are given or it does not exist yet.
MAKE_COORDINATOR=1
if [ ${#NAMES[@]} -eq 0 ]; then
  NAMES=(localhost 127.0.0.1)
  [ ! -f "$DIR/coordinator.pem" ] || MAKE_COORDINATOR=0
fi
command -v openssl >/dev/null || { echo "dev-certs.sh: openssl is not installed (apt-get install openssl)" >&2; exit 1; }

mkdir -p "$DIR"
umask 077
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# P-256 keys: small, fast to make, and what every TLS stack speaks.
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

if [ ! -f "$DIR/ca.pem" ] || [ ! -f "$DIR/ca.key" ]; then
  new_key "$DIR/ca.key"
  openssl req -x509 -new -key "$DIR/ca.key" -subj "/O=podscope/CN=podscope development CA" -days "$((DAYS * 2))" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$DIR/ca.pem" 2>/dev/null
fi

# sign NAME CN DAYS EXT_LINES...: DIR/NAME.key and DIR/NAME.pem signed by the CA.
sign() {
  local name="$1" cn="$2" days="$3"
  shift 3
  new_key "$DIR/$name.key"
  openssl req -new -key "$DIR/$name.key" -subj "/O=podscope/CN=$cn" -out "$WORK/$name.csr" 2>/dev/null
  printf '%s\n' "$@" >"$WORK/$name.ext"
  openssl x509 -req -in "$WORK/$name.csr" -CA "$DIR/ca.pem" -CAkey "$DIR/ca.key" -CAcreateserial \
    -CAserial "$WORK/ca.srl" -days "$days" -extfile "$WORK/$name.ext" -out "$DIR/$name.pem" 2>/dev/null
}

SAN=""
for n in "${NAMES[@]}"; do
  if [[ "$n" =~ ^[0-9.]+$ || "$n" == *:* ]]; then SAN+="IP:$n,"; else SAN+="DNS:$n,"; fi
done
if [ "$MAKE_COORDINATOR" = 1 ]; then
  # For serving only: with clientAuth it could also pass as an agent named like the coordinator.
  sign coordinator "${NAMES[0]}" "$DAYS" "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth" "subjectAltName=${SAN%,}"
fi
for a in ${AGENTS[@]+"${AGENTS[@]}"}; do
  sign "agent-$a" "$a" "$DAYS" "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=clientAuth" "subjectAltName=DNS:$a"
done
for a in ${EXPIRED[@]+"${EXPIRED[@]}"}; do
  sign "agent-$a" "$a" -1 "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=clientAuth" "subjectAltName=DNS:$a"
done
chmod 644 "$DIR"/*.pem
echo "dev-certs.sh: CA and certificates in $DIR (coordinator names: ${NAMES[*]}; agents: ${AGENTS[*]:-none} ${EXPIRED[*]:+expired: ${EXPIRED[*]}})"
