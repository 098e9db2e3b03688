#!/bin/sh
# Makes a small CA and one certificate per node for a test cluster's
# mutual TLS ([cluster.tls]); the openssl command line only.
#
#   scripts/make-test-ca.sh DIR NODE [NODE...]
#
# Writes DIR/ca.pem (the CA certificate every node trusts: ca_file),
# DIR/ca.key, and for each NODE DIR/NODE.pem (cert_file) and DIR/NODE.key
# (key_file, mode 0600). A node's certificate names it by its
# cluster.node_name (common name and DNS subjectAltName), which is how
# peers know who it is. Keys are EC P-256; certificates last 30 days.
# For tests and trials: a production CA keeps its key elsewhere.
set -eu

if [ $# -lt 2 ]; then
  echo "usage: $0 DIR NODE [NODE...]" >&2
  exit 2
fi
dir=$1
shift
mkdir -p "$dir"
umask 077

if [ ! -f "$dir/ca.key" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 30 \
    -subj "/CN=isometry test CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

for node in "$@"; do
  case $node in
    *[!A-Za-z0-9._-]* | "")
      echo "$0: node name '$node' must be letters, digits, '.', '_' or '-'" >&2
      exit 2
      ;;
  esac
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/$node.key" -out "$dir/$node.csr" -subj "/CN=$node" 2>/dev/null
  ext="$dir/$node.ext"
  printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' \
    "$node" >"$ext"
  openssl x509 -req -in "$dir/$node.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 30 -extfile "$ext" -out "$dir/$node.pem" 2>/dev/null
  rm -f "$dir/$node.csr" "$ext"
done
chmod 644 "$dir/ca.pem" "$dir"/*.pem
echo "CA: $dir/ca.pem; nodes: $*"
