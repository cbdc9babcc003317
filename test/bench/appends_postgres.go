package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL engine of the appends scenario: Debian's PostgreSQL 15 in a cluster
// the harness makes and starts itself (initdb into a temporary folder, listening on
// 127.0.0.1 only, a free port), stopped when the scenario ends. The schema is Message
// DB's: one messages table with a global position, the stream name and the position in
// the stream, unique on (stream, position); an append is one call of a PL/pgSQL
// function that, in one transaction, takes an advisory lock on the stream, reads its
// head, compares it with the expected revision and inserts the events, as Message
// DB's write_message does.

const pgBinDir = "/usr/lib/postgresql/15/bin"

const pgSchema = `
DROP TABLE IF EXISTS messages;
CREATE TABLE messages (
	global_position bigserial PRIMARY KEY,
	position bigint NOT NULL,
	time timestamp NOT NULL DEFAULT (now() AT TIME ZONE 'utc'),
	stream_name text NOT NULL,
	type text NOT NULL,
	data jsonb,
	id uuid NOT NULL DEFAULT gen_random_uuid()
);
CREATE UNIQUE INDEX messages_stream ON messages (stream_name, position);
CREATE OR REPLACE FUNCTION append_events(p_stream text, p_expected bigint, p_data jsonb[])
RETURNS bigint AS $$
DECLARE
	cur bigint;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtextextended(p_stream, 0));
	SELECT coalesce(max(position), -1) INTO cur FROM messages WHERE stream_name = p_stream;
	IF cur <> p_expected THEN
		RETURN -2 - cur; -- a wrong expected revision: nothing written
	END IF;
	INSERT INTO messages (stream_name, position, type, data)
		SELECT p_stream, cur + o, 'Appended', d FROM unnest(p_data) WITH ORDINALITY AS t(d, o);
	RETURN cur + array_length(p_data, 1);
END;
$$ LANGUAGE plpgsql;
`

// pgCluster is the harness's PostgreSQL server, started on first use.
type pgCluster struct {
	dir, port string
	asUser    string // run the server binaries as this user (PostgreSQL refuses root)
	err       error
}

var (
	pgOnce sync.Once
	pg     pgCluster
)

// pgAvailable reports why the PostgreSQL engine cannot run, or "" when it can.
func pgAvailable() string {
	if _, err := os.Stat(filepath.Join(pgBinDir, "initdb")); err != nil {
		return "PostgreSQL 15 is not installed (make bench-deps installs postgresql-15 from Debian)"
	}
	return ""
}

func (c *pgCluster) run(name string, args ...string) error {
	bin := filepath.Join(pgBinDir, name)
	var cmd *exec.Cmd
	if c.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.asUser, "--", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// startPG makes and starts the cluster under base.
func startPG(base string) error {
	pgOnce.Do(func() {
		if os.Geteuid() == 0 {
			// The server runs as postgres, which must reach its folder: the system's
			// temporary folder, not base, whose parents may be private to root.
			base = ""
		}
		dir, err := os.MkdirTemp(base, "rockline-bench-pg-")
		if err != nil {
			pg.err = err
			return
		}
		pg.dir = dir
		if os.Geteuid() == 0 {
			u, err := user.Lookup("postgres")
			if err != nil {
				pg.err = fmt.Errorf("running as root needs the postgres user to run the server: %w", err)
				return
			}
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			if err := os.Chown(dir, uid, gid); err != nil {
				pg.err = err
				return
			}
			pg.asUser = "postgres"
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			pg.err = err
			return
		}
		pg.port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		data := filepath.Join(dir, "data")
		if pg.err = pg.run("initdb", "-D", data, "-A", "trust", "-U", "bench", "--no-sync", "-E", "UTF8"); pg.err != nil {
			return
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %s -k %s -c fsync=on -c max_connections=64 -c shared_buffers=256MB", pg.port, dir)
		pg.err = pg.run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "start")
	})
	return pg.err
}

// stopPG stops the cluster if it was started and removes its folder.
func stopPG() {
	if pg.dir == "" {
		pg, pgOnce = pgCluster{}, sync.Once{}
		return
	}
	if pg.port != "" {
		_ = pg.run("pg_ctl", "-D", filepath.Join(pg.dir, "data"), "-m", "fast", "-w", "stop")
	}
	os.RemoveAll(pg.dir)
	pg, pgOnce = pgCluster{}, sync.Once{} // a later run starts a new cluster
}

// pgAppender is one run's pool of connections and a fresh messages table.
type pgAppender struct {
	pool *pgxpool.Pool
}

func openPGAppender(cfg *config, sync bool) (appender, error) {
	if err := startPG(cfg.dir); err != nil {
		return nil, err
	}
	commit := "off"
	if sync {
		commit = "on"
	}
	pcfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://bench@127.0.0.1:%s/postgres?sslmode=disable&synchronous_commit=%s", pg.port, commit))
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = 16
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, pgSchema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("schema: %w", err)
	}
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil { // start each run from a clean WAL
		pool.Close()
		return nil, err
	}
	return &pgAppender{pool: pool}, nil
}

func (p *pgAppender) appendEvents(ctx context.Context, stream string, expected int64, events [][]byte) (int64, bool, error) {
	data := make([]string, len(events))
	for i, e := range events {
		data[i] = string(e)
	}
	var got int64
	if err := p.pool.QueryRow(ctx, "SELECT append_events($1, $2, $3::jsonb[])", stream, expected, data).Scan(&got); err != nil {
		return 0, false, err
	}
	if got <= -2 {
		return 0, true, nil
	}
	if got != expected+int64(len(events)) {
		return 0, false, fmt.Errorf("append returned revision %d, want %d", got, expected+int64(len(events)))
	}
	return got, false, nil
}

func (p *pgAppender) head(ctx context.Context, stream string) (int64, error) {
	var cur int64
	err := p.pool.QueryRow(ctx, "SELECT coalesce(max(position), -1) FROM messages WHERE stream_name = $1", stream).Scan(&cur)
	return cur, err
}

func (p *pgAppender) events(ctx context.Context, stream string) ([][]byte, error) {
	rows, err := p.pool.Query(ctx, "SELECT position, data::text FROM messages WHERE stream_name = $1 ORDER BY position", stream)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var pos int64
		var data string
		if err := rows.Scan(&pos, &data); err != nil {
			return nil, err
		}
		if pos != int64(len(out)) {
			return nil, fmt.Errorf("position %d where %d was due", pos, len(out))
		}
		out = append(out, []byte(canonicalJSON(data)))
	}
	return out, rows.Err()
}

// canonicalJSON undoes jsonb's reformatting of the harness's flat payload objects
// (a space after each colon and comma), so read-back compares equal to what was sent.
func canonicalJSON(s string) string {
	return strings.NewReplacer(`": `, `":`, `, "`, `,"`).Replace(s)
}

func (p *pgAppender) fsyncs() int64 {
	var n int64
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.pool.QueryRow(ctx, "SELECT wal_sync FROM pg_stat_wal").Scan(&n); err != nil {
		return -1
	}
	return n
}

// serverCPU sums the user and system time of the postmaster and its children (the
// backends serving this run's connections, the WAL writer, the checkpointer), read
// from /proc.
func (p *pgAppender) serverCPU() time.Duration {
	b, err := os.ReadFile(filepath.Join(pg.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	master, _, _ := strings.Cut(string(b), "\n")
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks uint64
	for _, d := range procs {
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15): split after the comm's ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 || (d.Name() != master && f[1] != master) {
			continue
		}
		u, _ := strconv.ParseUint(f[11], 10, 64)
		s, _ := strconv.ParseUint(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

func (p *pgAppender) close() error {
	p.pool.Close()
	return nil
}
