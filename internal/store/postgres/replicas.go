package postgres

import (
	"context"
	"strconv"

	"github.com/doppelproxy/doppel/internal/shared"
	"github.com/jackc/pgx/v5"
)

// Replicas is the fleet's registry of this configuration (SPEC §18.1).
type Replicas struct{ s *Store }

// Replicas is the registry of the replicas serving this configuration.
func (s *Store) Replicas() Replicas { return Replicas{s} }

var _ shared.Replicas = Replicas{}

var (
	lostAfter   = strconv.Itoa(int(shared.LostAfter.Seconds())) + " seconds"
	forgetAfter = strconv.Itoa(int(shared.ForgetAfter.Seconds())) + " seconds"
)

// Beat implements shared.Replicas: one upsert, and the forgetting of rows
// lost long enough, in one round trip.
func (rs Replicas) Beat(ctx context.Context, r shared.Replica) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO doppel_replicas (id, config, url, host, pid, version, revision, started_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, revision = EXCLUDED.revision, seen_at = now()`,
		r.ID, rs.s.name, r.URL, r.Host, r.PID, r.Version, r.Revision, r.StartedAt)
	b.Queue(`DELETE FROM doppel_replicas WHERE config = $1 AND seen_at < now() - $2::interval`, rs.s.name, forgetAfter)
	return rs.s.pool.SendBatch(ctx, b).Close()
}

// Leave implements shared.Replicas.
func (rs Replicas) Leave(ctx context.Context, id string) error {
	_, err := rs.s.pool.Exec(ctx, `DELETE FROM doppel_replicas WHERE id = $1`, id)
	return err
}

// List implements shared.Replicas: the database's clock says who is lost,
// so replicas on hosts whose clocks differ agree.
func (rs Replicas) List(ctx context.Context) ([]shared.Replica, error) {
	rows, err := rs.s.pool.Query(ctx, `SELECT id, url, host, pid, version, revision, started_at, seen_at,
			CASE WHEN seen_at >= now() - $2::interval THEN 'live' ELSE 'lost' END AS state
		FROM doppel_replicas WHERE config = $1 AND seen_at >= now() - $3::interval
		ORDER BY seen_at < now() - $2::interval, started_at, id LIMIT $4`, rs.s.name, lostAfter, forgetAfter, shared.MaxReplicas)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (shared.Replica, error) {
		var r shared.Replica
		err := row.Scan(&r.ID, &r.URL, &r.Host, &r.PID, &r.Version, &r.Revision, &r.StartedAt, &r.SeenAt, &r.State)
		r.StartedAt, r.SeenAt = r.StartedAt.UTC(), r.SeenAt.UTC()
		return r, err
	})
}
