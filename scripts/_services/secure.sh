# Secured services for scripts/services.sh (sourced): Kafka on SASL_SSL with SCRAM-SHA-512 and
# Cassandra with PasswordAuthenticator and client TLS, from a throwaway CA made here with openssl.
#
# Layout under the state folder:
#   tls/ca.crt          the CA clients trust (PEM); tls/ca.key stays here (0600)
#   tls/server.p12      the key and certificate (SAN IP:127.0.0.1, DNS:localhost) both services
#                       present, PKCS12; tls/store.password its password
#   <service>/client.env  the STREAMCRAWL_* exports a client needs (0600), merged into env
# Passwords are 32 hex digits from /dev/urandom, new at every launch (the data is new too).

TLS_DAYS=30

random_secret() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }

# Writes stdin to a file only its owner can read.
write_private() {  # file
    (umask 077 && cat >"$1")
}

# The CA and the server store, made once per state folder (kept while both services may use
# them: a running Kafka keeps its certificate when Cassandra is restarted, and vice versa).
ensure_tls() {
    local tls=$STATE/tls
    if [[ -f $tls/.complete ]] && openssl x509 -checkend 86400 -noout -in "$tls/server.crt" >/dev/null 2>&1; then
        return 0
    fi
    command -v openssl >/dev/null || die "openssl not found: it makes the CA of --secure (apt-get install openssl)"
    rm -rf "$tls"
    (umask 077 && mkdir -p "$tls")
    local log=$tls/openssl.log
    {
        openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$TLS_DAYS" \
            -subj "/CN=streamcrawl development CA" \
            -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign" \
            -keyout "$tls/ca.key" -out "$tls/ca.crt" &&
            openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=localhost" \
                -keyout "$tls/server.key" -out "$tls/server.csr" &&
            openssl x509 -req -sha256 -days "$TLS_DAYS" -in "$tls/server.csr" \
                -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial -out "$tls/server.crt" \
                -extfile <(printf '%s\n' \
                    "subjectAltName=IP:127.0.0.1,DNS:localhost" \
                    "basicConstraints=critical,CA:FALSE" \
                    "keyUsage=critical,digitalSignature,keyEncipherment" \
                    "extendedKeyUsage=serverAuth" \
                    "subjectKeyIdentifier=hash" \
                    "authorityKeyIdentifier=keyid")
    } >"$log" 2>&1 || { tail -n 20 "$log" >&2; die "openssl could not make the CA (log: $log)"; }
    random_secret | write_private "$tls/store.password"
    openssl pkcs12 -export -name server -in "$tls/server.crt" -inkey "$tls/server.key" \
        -certfile "$tls/ca.crt" -out "$tls/server.p12" -passout "file:$tls/store.password" \
        >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "openssl could not write the PKCS12 store"; }
    chmod 0644 "$tls/ca.crt"
    rm -f "$tls/server.csr"
    touch "$tls/.complete"
    say "tls: CA and server certificate for 127.0.0.1 made in $tls (valid ${TLS_DAYS} days)"
}

# -- Kafka ------------------------------------------------------------------------------------

# The SASL_SSL listener replaces PLAINTEXT; the broker talks to itself over it as user "admin".
# The controller listener stays PLAINTEXT on 127.0.0.1: only this node uses it (KRaft cannot
# authenticate SCRAM there, as the credentials live in the metadata it serves).
write_kafka_secure_config() {  # dir port
    local dir=$1 port=$2 tls=$STATE/tls store_pw admin_pw
    store_pw=$(<"$tls/store.password")
    admin_pw=$(<"$dir/admin.password")
    sed -i -e "/^listeners=/s|PLAINTEXT://|SASL_SSL://|" \
        -e "s|^advertised.listeners=.*|advertised.listeners=SASL_SSL://127.0.0.1:$port|" \
        -e "s|^listener.security.protocol.map=.*|listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT|" \
        -e "s|^inter.broker.listener.name=.*|inter.broker.listener.name=SASL_SSL|" \
        "$dir/server.properties"
    # The file holds passwords: owner-only, like the stores.
    chmod 0600 "$dir/server.properties"
    cat >>"$dir/server.properties" <<EOF
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin_pw";
ssl.keystore.type=PKCS12
ssl.keystore.location=$tls/server.p12
ssl.keystore.password=$store_pw
ssl.key.password=$store_pw
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.crt
ssl.client.auth=none
EOF
}

# New passwords for the broker's own user and the client user; echoes the storage tool's
# --add-scram arguments (KIP-900: KRaft keeps SCRAM credentials in the metadata log, so they
# are written when the storage is formatted). The tool takes them only as arguments, so they
# show in `ps` for the 2 s it runs: acceptable for a local, throwaway cluster.
kafka_scram_users() {  # dir
    local dir=$1
    random_secret | write_private "$dir/admin.password"
    random_secret | write_private "$dir/client.password"
    printf '%s\n' --add-scram "SCRAM-SHA-512=[name=admin,password=$(<"$dir/admin.password")]" \
        --add-scram "SCRAM-SHA-512=[name=streamcrawl,password=$(<"$dir/client.password")]"
}

write_kafka_client_env() {  # dir port secure
    local dir=$1 port=$2
    {
        echo "export STREAMCRAWL_KAFKA_BOOTSTRAP=127.0.0.1:$port"
        if [[ $3 == 1 ]]; then
            echo "export STREAMCRAWL_KAFKA_SECURITY_PROTOCOL=SASL_SSL"
            echo "export STREAMCRAWL_KAFKA_SASL_MECHANISM=SCRAM-SHA-512"
            echo "export STREAMCRAWL_KAFKA_SASL_USERNAME=streamcrawl"
            echo "export STREAMCRAWL_KAFKA_SASL_PASSWORD=$(<"$dir/client.password")"
            echo "export STREAMCRAWL_KAFKA_SSL_CAFILE=$STATE/tls/ca.crt"
        fi
    } | write_private "$dir/client.env"
}

# -- Cassandra --------------------------------------------------------------------------------

write_cassandra_secure_config() {  # dir
    local dir=$1 tls=$STATE/tls
    chmod 0600 "$dir/cassandra.yaml"
    cat >>"$dir/cassandra.yaml" <<EOF
authenticator:
  class_name: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
client_encryption_options:
  enabled: true
  optional: false
  keystore: $tls/server.p12
  keystore_password: $(<"$tls/store.password")
  store_type: PKCS12
  require_client_auth: false
EOF
    random_secret | write_private "$dir/client.password"
    random_secret | write_private "$dir/superuser.password"
}

write_cassandra_client_env() {  # dir port secure
    local dir=$1 port=$2
    {
        echo "export STREAMCRAWL_CASSANDRA_HOSTS=127.0.0.1:$port"
        if [[ $3 == 1 ]]; then
            echo "export STREAMCRAWL_CASSANDRA_USERNAME=streamcrawl"
            echo "export STREAMCRAWL_CASSANDRA_PASSWORD=$(<"$dir/client.password")"
            echo "export STREAMCRAWL_CASSANDRA_SSL=true"
            echo "export STREAMCRAWL_CASSANDRA_SSL_CAFILE=$STATE/tls/ca.crt"
        fi
    } | write_private "$dir/client.env"
}

# Once the node serves: log in as the default superuser cassandra/cassandra, create the client
# role "streamcrawl" (it may create keyspaces, and owns those it creates), then give the
# superuser a random password (kept in cassandra/superuser.password).
setup_cassandra_roles() {  # dir endpoint timeout
    local dir=$1
    SERVICES_CLIENT_PASSWORD=$(<"$dir/client.password") \
        SERVICES_SUPERUSER_PASSWORD=$(<"$dir/superuser.password") \
        SERVICES_CAFILE=$STATE/tls/ca.crt \
        "$PYTHON" "$HERE/probe.py" cassandra-roles "$2" "$3"
}
