// Package ovsdb is how every ovn-transparent component talks to an OVSDB server: the OVN
// Northbound and Southbound databases and the local Open_vSwitch database.
//
// New returns a libovsdb client that is connected, stays on the leader of a clustered (RAFT)
// database, reconnects by itself with backoff, and caches only the tables the component asked
// for. Transact sends operations built with the client's API (Create, Where(...).Update, ...)
// as one transaction and turns a rejected operation into an error that names the operation,
// its table and its row.
//
// What libovsdb v0.7.0 does on a disconnection, and what callers can rely on:
//   - The client reconnects with backoff, forever, to the first remote that answers (and is the
//     leader, unless Config.AllowFollower). Transactions issued meanwhile wait for the new
//     connection until their context is done.
//   - On reconnection the monitor is sent again. For a standalone server, or when the server no
//     longer knows the last transaction the client saw, the cache is emptied and refilled, so
//     rows added, changed or deleted while the client was away are right afterwards. For a
//     cluster member that still knows that transaction, only the missed changes are applied.
//   - Cache event handlers see an Add for every row after a refill but no Delete for rows that
//     went away while the client was disconnected (the cache is purged silently). Controllers
//     must therefore re-sync every key from the cache after a reconnection, not rely on events.
//   - A transaction in flight when the connection drops fails with client.ErrNotConnected; it
//     may or may not have been committed. Controllers must build idempotent transactions.
//   - Connected() keeps returning true after the server went away; CurrentEndpoint() is ""
//     while the client is between connections.
package ovsdb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultReconnectTimeout is the time one connection attempt may take when
// Config.ReconnectTimeout is zero.
const DefaultReconnectTimeout = 30 * time.Second

// DefaultInactivityProbe is how long a connection may carry nothing before the client sends
// an echo, and then how long it waits for the reply before it drops the connection and
// reconnects, when Config.InactivityProbe is zero.
const DefaultInactivityProbe = 10 * time.Second

// DefaultTransactTimeout is how long a transaction sent may wait for its reply when
// Config.TransactTimeout is zero: far more than any transaction of ours takes on a healthy
// server, even the master's first one on a large cluster.
const DefaultTransactTimeout = 60 * time.Second

// Config says where the database is and what the component needs from it.
type Config struct {
	// Remotes lists the servers the way ovn-nbctl's --db does: "unix:PATH", "tcp:HOST:PORT"
	// or "ssl:HOST:PORT", several of them separated by commas (one per cluster member).
	// PATH must be absolute; an IPv6 HOST is written in brackets ("tcp:[::1]:6641").
	Remotes string

	// PrivateKeyFile, CertificateFile and CACertFile are the PEM files used with ssl: remotes,
	// like ovn-nbctl's --private-key, --certificate and --ca-cert. They are required when a
	// remote is ssl:. New reads them, and every later (re)connection reads them again, so
	// rotated certificates take effect on the next reconnection.
	PrivateKeyFile  string
	CertificateFile string
	CACertFile      string

	// ServerName is the name the server's certificate must carry (as a DNS or IP subject
	// alternative name) on ssl: remotes. Empty means the host of the remote dialled, which
	// suits certificates issued per host; set it when the servers' certificates name a
	// service instead (ovs-pki's "ovnnb", a Kubernetes Service's DNS name).
	ServerName string

	// ReconnectTimeout bounds one connection attempt, including the initial monitor reply
	// that carries every monitored row. Zero means DefaultReconnectTimeout.
	ReconnectTimeout time.Duration

	// InactivityProbe is how often the client sends an echo; an echo not answered within
	// the same time drops the connection, and the client reconnects. Without it a server that hangs, or a peer lost behind a half-open TCP
	// connection, would hold every transaction until TCP gives up (up to about 15
	// minutes). Zero means DefaultInactivityProbe; negative turns the probe off.
	InactivityProbe time.Duration

	// TransactTimeout bounds a transaction once it is sent (waiting for a connection is
	// not counted: that lasts until the caller's context is done). A server that hangs with
	// a transaction in flight is dropped only once the transaction has returned, so this is
	// also how long the client may stay on such a server. Zero means
	// DefaultTransactTimeout.
	TransactTimeout time.Duration

	// AllowFollower lets the client stay on a cluster member that is not the RAFT leader.
	// By default (false) the client connects only to the leader and moves to the new leader
	// when leadership changes, which is what a writer needs. A standalone server always
	// counts as the leader.
	AllowFollower bool

	// Logger receives New's messages at V(2) and libovsdb's: connection changes at V(3),
	// transactions at V(4), every cache update at V(5), and errors (failed reconnections,
	// cache errors) regardless of verbosity. The zero Logger discards everything.
	Logger logr.Logger

	// Metrics, if set, receives the client's counters of disconnections and monitor
	// updates, named <MetricsPrefix>_disconnects_total, _update_messages_total,
	// _table_updates_total and _monitors. MetricsPrefix must then be two words joined by an
	// underscore (a namespace and a subsystem: "ovnt_master_nb").
	Metrics       prometheus.Registerer
	MetricsPrefix string

	// Tables are the tables to monitor. Only these tables have rows in the client's cache;
	// the other tables of the database model stay empty. At least one is required.
	Tables []Table
}

// Table selects a table to monitor and, optionally, which of its columns.
type Table struct {
	// Model is a pointer to a model struct of the table, such as &nbdb.LogicalSwitch{}.
	Model model.Model
	// Fields, when not empty, are pointers to fields of that same struct value (for example
	// &ls.Name, &ls.ExternalIDs); only those columns are monitored and filled in the cache.
	Fields []interface{}
}

// New connects to one of cfg.Remotes and monitors cfg.Tables of the database described by
// dbModel. It returns once the client is connected and the cache holds the current rows of
// those tables.
//
// While no remote accepts the connection (none is up yet, or no member of the cluster is
// leader yet), New keeps trying with backoff until ctx is done, then returns ctx's error
// together with the last connection error. ctx bounds only this start-up: afterwards the
// client reconnects by itself, forever, whenever the connection drops or the server it is on
// loses leadership.
//
// The caller owns the client and calls Close when done. Close the client only at shutdown:
// in libovsdb v0.7.0, Close while the client is between connections does not stop its
// reconnection loop.
func New(ctx context.Context, dbModel model.ClientDBModel, cfg Config) (client.Client, error) {
	if len(cfg.Tables) == 0 {
		return nil, errors.New("ovsdb: no tables to monitor")
	}
	remotes, err := parseRemotes(cfg.Remotes)
	if err != nil {
		return nil, err
	}
	timeout := cfg.ReconnectTimeout
	if timeout <= 0 {
		timeout = DefaultReconnectTimeout
	}
	// Always hand libovsdb a logger: given none, it prints every cache update to stderr.
	// The zero logr.Logger discards.
	logger := cfg.Logger
	libovsdbLogger := logger.WithName("libovsdb")
	opts := []client.Option{
		client.WithLogger(&libovsdbLogger),
		client.WithLeaderOnly(!cfg.AllowFollower),
	}
	// The inactivity probe is ours (probe.go), not libovsdb's WithInactivityCheck: in
	// v0.7.0 a transaction answered just as that probe gives up on the server either panics
	// (send on a closed channel) or deadlocks with the probe.
	opts = append(opts, client.WithReconnect(timeout, newBackoff()))
	for _, r := range remotes {
		opts = append(opts, client.WithEndpoint(r))
	}
	if cfg.Metrics != nil {
		i := strings.LastIndex(cfg.MetricsPrefix, "_")
		if i <= 0 || i == len(cfg.MetricsPrefix)-1 {
			return nil, fmt.Errorf("ovsdb: metrics prefix %q is not <namespace>_<subsystem>", cfg.MetricsPrefix)
		}
		opts = append(opts, client.WithMetricsRegistryNamespaceSubsystem(cfg.Metrics, cfg.MetricsPrefix[:i], cfg.MetricsPrefix[i+1:]))
	}
	if usesSSL(remotes) {
		tlsConfig, err := cfg.tlsConfig(remotes)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithTLSConfig(tlsConfig))
	}
	c, err := client.NewOVSDBClient(dbModel, opts...)
	if err != nil {
		return nil, fmt.Errorf("ovsdb: client for %s: %w", dbModel.Name(), err)
	}
	if err := connect(ctx, c, timeout, logger); err != nil {
		return nil, fmt.Errorf("ovsdb: connect to %s at %s: %w", dbModel.Name(), cfg.Remotes, err)
	}
	if err := monitor(ctx, c, cfg.Tables); err != nil {
		c.Close()
		return nil, fmt.Errorf("ovsdb: monitor %s at %s: %w", dbModel.Name(), c.CurrentEndpoint(), err)
	}
	logger.V(2).Info("connected", "endpoint", c.CurrentEndpoint(), "tables", len(cfg.Tables))
	probe := cfg.InactivityProbe
	if probe == 0 {
		probe = DefaultInactivityProbe
	}
	return newProbed(c, probe, cfg.transactTimeout(), logger), nil
}

// newBackoff is the delay between connection attempts: 250ms doubling up to 8s, with jitter,
// never giving up. libovsdb v0.7.0 panics when its reconnection backoff stops
// (cenkalti/backoff's default gives up after 15 minutes), so MaxElapsedTime must be zero.
func newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 250 * time.Millisecond
	b.Multiplier = 2
	b.MaxInterval = 8 * time.Second
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// connect makes the first connection, retrying until ctx is done. libovsdb's own reconnection
// loop only starts after a first successful Connect.
func connect(ctx context.Context, c client.Client, attemptTimeout time.Duration, logger logr.Logger) error {
	b := newBackoff()
	var last error // of the last attempt that ended on its own
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := c.Connect(attemptCtx)
		cancel()
		if err == nil {
			return nil
		}
		if c.Connected() {
			// Connected, but the leader watch on the _Server database could not be set
			// up; a second Connect would return early without it, so give up.
			c.Close()
			return err
		}
		if ctx.Err() != nil {
			// ctx ended this attempt: an earlier one's error (a certificate refused, a
			// socket missing) says more than the dial cut short.
			if last == nil {
				last = err
			}
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), last)
		}
		last = err
		wait := b.NextBackOff()
		logger.V(2).Info("cannot connect yet", "error", err.Error(), "retryIn", wait)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), last)
		case <-timer.C:
		}
	}
}

// monitor starts the one monitor of the client. If the connection dropped right after
// Connect, libovsdb reconnects by itself and the monitor is retried on the new connection.
func monitor(ctx context.Context, c client.Client, tables []Table) error {
	for {
		opts := make([]client.MonitorOption, 0, len(tables))
		for _, t := range tables {
			opts = append(opts, client.WithTable(t.Model, t.Fields...))
		}
		_, err := c.Monitor(ctx, c.NewMonitor(opts...))
		if !errors.Is(err, client.ErrNotConnected) {
			return err
		}
		timer := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		case <-timer.C:
		}
	}
}

// parseRemotes splits an ovn-nbctl style --db value into libovsdb endpoints and checks each
// one, because libovsdb silently replaces a malformed endpoint by its default
// (unix:/var/run/openvswitch/ovsdb.sock or 127.0.0.1:6640).
func parseRemotes(remotes string) ([]string, error) {
	var out []string
	for _, r := range strings.Split(remotes, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		scheme, addr, _ := strings.Cut(r, ":")
		switch scheme {
		case client.UNIX:
			u, err := url.Parse(r)
			if !strings.HasPrefix(addr, "/") || err != nil || u.Path != addr {
				return nil, fmt.Errorf("ovsdb: remote %q: want unix:/absolute/path (no ?, # or %% in the path)", r)
			}
		case client.TCP, client.SSL:
			host, port, err := net.SplitHostPort(addr)
			if err != nil || host == "" || port == "" {
				return nil, fmt.Errorf("ovsdb: remote %q: want %s:HOST:PORT", r, scheme)
			}
		default:
			return nil, fmt.Errorf("ovsdb: remote %q: want unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT", r)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ovsdb: no remote in %q", remotes)
	}
	return out, nil
}

func usesSSL(remotes []string) bool {
	for _, r := range remotes {
		if strings.HasPrefix(r, client.SSL+":") {
			return true
		}
	}
	return false
}

// tlsConfig builds the TLS settings for ssl: remotes from cfg's file paths.
//
// The server's certificate must chain to the CA certificate and name the server: cfg.ServerName
// if set, else the host of the ssl: remote dialled (verifyServer). Go's built-in verification
// would check the name too, but against a CA pool fixed when the client is made; it is switched
// off and replaced by verifyServer, which reads the CA file on every handshake so that a
// rotated CA takes effect on the next reconnection, like the client's own certificate.
func (cfg *Config) tlsConfig(remotes []string) (*tls.Config, error) {
	if cfg.PrivateKeyFile == "" || cfg.CertificateFile == "" || cfg.CACertFile == "" {
		return nil, errors.New("ovsdb: an ssl: remote needs PrivateKeyFile, CertificateFile and CACertFile")
	}
	// Fail now, not on the first handshake, if the files are unusable.
	if _, err := cfg.loadKeyPair(); err != nil {
		return nil, err
	}
	if _, err := cfg.loadCA(); err != nil {
		return nil, err
	}
	names := serverNames{want: cfg.ServerName}
	for _, r := range remotes {
		if addr, ok := strings.CutPrefix(r, client.SSL+":"); ok {
			host, _, _ := net.SplitHostPort(addr) // parseRemotes checked it
			if ip := net.ParseIP(host); ip != nil {
				names.ips = append(names.ips, host)
			}
		}
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return cfg.loadKeyPair()
		},
		InsecureSkipVerify: true, // replaced by VerifyConnection, see above
		VerifyConnection: func(cs tls.ConnectionState) error {
			return cfg.verifyServer(cs, names)
		},
	}, nil
}

// serverNames is what a server's certificate may be named.
type serverNames struct {
	// want, if set, is the one name every server must carry (Config.ServerName).
	want string
	// ips are the IP addresses among the ssl: remotes. Go reports the host dialled to the
	// verifier only when it is a DNS name (ConnectionState.ServerName is the SNI, which never
	// carries an address), and libovsdb shares one tls.Config between all remotes; so a
	// server reached by address must name one of these. With one remote that is exactly the
	// one dialled; with several, the members of one cluster, a member's certificate passes at
	// another member's address, which only matters once that member's key is stolen.
	ips []string
}

func (cfg *Config) verifyServer(cs tls.ConnectionState, names serverNames) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("ovsdb: server sent no certificate")
	}
	roots, err := cfg.loadCA()
	if err != nil {
		return err
	}
	leaf := cs.PeerCertificates[0]
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	_, err = leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("ovsdb: server certificate %q: %w", leaf.Subject, err)
	}
	// Names are checked as Go's own verification does (subject alternative names only; the
	// common name counts for nothing).
	switch {
	case names.want != "":
		err = leaf.VerifyHostname(names.want)
	case cs.ServerName != "":
		err = leaf.VerifyHostname(cs.ServerName)
	default:
		err = fmt.Errorf("x509: certificate is valid for %s, not for %s", certNames(leaf), strings.Join(names.ips, " or "))
		for _, ip := range names.ips {
			if leaf.VerifyHostname(ip) == nil {
				err = nil
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("ovsdb: server certificate %q does not name the server: %w", leaf.Subject, err)
	}
	return nil
}

// certNames lists the names a certificate is valid for, for error messages.
func certNames(c *x509.Certificate) string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "no name (it has no subject alternative names)"
	}
	return strings.Join(names, ", ")
}

func (cfg *Config) loadKeyPair() (*tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(cfg.CertificateFile, cfg.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("ovsdb: certificate %s with key %s: %w", cfg.CertificateFile, cfg.PrivateKeyFile, err)
	}
	return &pair, nil
}

func (cfg *Config) loadCA() (*x509.CertPool, error) {
	pem, err := os.ReadFile(cfg.CACertFile)
	if err != nil {
		return nil, fmt.Errorf("ovsdb: CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ovsdb: CA certificate %s: no PEM certificate in it", cfg.CACertFile)
	}
	return pool, nil
}

// ClientTLS returns the TLS settings New uses with the ssl: remote, for another program of
// ours that dials an OVS ssl: target itself (the OpenFlow relay of a remote chassis): cfg's
// client certificate and CA, read again on every handshake, and the server's certificate
// checked as tlsConfig says.
func ClientTLS(cfg Config, remote string) (*tls.Config, error) {
	remotes, err := parseRemotes(remote)
	if err != nil {
		return nil, err
	}
	if len(remotes) != 1 || !usesSSL(remotes) {
		return nil, fmt.Errorf("ovsdb: %q: want one ssl:HOST:PORT", remote)
	}
	return cfg.tlsConfig(remotes)
}
