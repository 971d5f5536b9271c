#!/usr/bin/env bash
# Make a private certificate authority and TLS certificates for mgemm's Dask cluster (openssl).
#
#   cluster/make-certs.sh [DIR] [SAN ...]
#
# DIR (default $XDG_CONFIG_HOME/mgemm/certs, else ~/.config/mgemm/certs: keys stay out of the
# repository) receives ca.pem, ca-key.pem and, for each role scheduler / worker / client, ROLE.pem
# and ROLE-key.pem signed by that CA, valid for MGEMM_CERT_DAYS days (default 365).
# Each certificate names localhost, 127.0.0.1 and this host; add your other machines' names or
# addresses as extra arguments, e.g. `make-certs.sh ~/certs DNS:gpu-node-1 IP:10.0.0.12`.
# Dask checks that a peer's certificate is signed by the CA (both directions), not its host name.
# An existing CA in DIR is kept, so re-running only re-issues the role certificates.
# Copy DIR to every machine; keep ca-key.pem on the machine that issues certificates only.
set -euo pipefail

dir="${1:-${XDG_CONFIG_HOME:-$HOME/.config}/mgemm/certs}"
shift || true
days="${MGEMM_CERT_DAYS:-365}"

umask 077
mkdir -p "$dir"
cd "$dir"

sans="DNS:localhost,IP:127.0.0.1,DNS:$(hostname)"
for san in "$@"; do
  case "$san" in
    DNS:*|IP:*) sans="$sans,$san" ;;
    *) echo "make-certs.sh: '$san' is not DNS:name or IP:address" >&2; exit 2 ;;
  esac
done

if [[ ! -f ca.pem || ! -f ca-key.pem ]]; then
  openssl req -x509 -new -nodes -newkey rsa:3072 -sha256 -days "$days" \
    -subj "/CN=mgemm-cluster-ca" -keyout ca-key.pem -out ca.pem \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" 2>/dev/null
  echo "made CA        $dir/ca.pem"
fi

ext="$(mktemp)"
trap 'rm -f "$ext" "$dir"/*.csr' EXIT
cat > "$ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid,issuer
subjectAltName=$sans
EXT

for role in scheduler worker client; do
  openssl req -new -nodes -newkey rsa:3072 -sha256 -subj "/CN=mgemm-$role" \
    -keyout "$role-key.pem" -out "$role.csr" 2>/dev/null
  openssl x509 -req -in "$role.csr" -CA ca.pem -CAkey ca-key.pem -sha256 -days "$days" \
    -set_serial "0x$(openssl rand -hex 16)" -extfile "$ext" -out "$role.pem" 2>/dev/null
  openssl verify -CAfile ca.pem "$role.pem" >/dev/null
  echo "made $(printf '%-9s' "$role") $dir/$role.pem ($sans)"
done
chmod 644 ca.pem scheduler.pem worker.pem client.pem
