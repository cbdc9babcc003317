// Package validators decides, atomically with the write, whether a commit may land.
//
// A Validator takes a Commit (the transaction's read position, the fingerprints of the
// keys it read and wrote, its data batch), checks that no key the transaction tracked
// was written by another commit after its read position, assigns the commit the next
// dense log position, and writes data and log entry in one RocksDB batch. Either
// everything lands or nothing does.
//
// # Environment
//
// Everything a validator calls back into is one Env, given to New (the batch write
// and the reads Checks make, the log family with its key and filler encodings, and
// the Positions it assigns and publishes), plus each commit's Record (the encoder of
// its log entry and the observer of its stages), which the caller hangs on the
// Commit. Each one's contract says who calls it and on which goroutine. The pipeline's Env is backed by RocksDB and its sequencer; the tests'
// fake records every call, so the validators are tested without storage as well as
// with it.
//
// # Conflict state
//
// Conflicts are decided against a table of the last write position of each recently
// written key, keyed by a 64-bit fingerprint of (column family, key) (see
// Fingerprinter). A commit conflicts when any of its fingerprints maps to a position
// above its read position. Entries at or below the oldest read position of any open
// transaction can never decide a conflict and are pruned, so the table holds only what
// open transactions need. A transaction that stays open while more than MaxTableKeys
// distinct keys are written is told so with ErrTxnTooOld instead of being validated
// against an incomplete table: a conflict is never missed. False conflicts come only
// from 64-bit fingerprint collisions (about one in 2^64 per pair of keys), never from
// two keys sharing a lock bucket.
//
// A commit's fingerprints come in three sets: Reads (keys read with tracking) and
// Writes are checked, and Writes are recorded; Marks (keys written at commit whose
// values need the position, pipeline.Txn.PutAtCommit) are recorded but not checked,
// so a reader of such a key conflicts while two commits marking it do not. Since
// two commits marking one key may both pass, their writes must still land in
// position order: the parallel policy's bucket locks cover Marks and are held until
// publication, and the serial policy writes a group with Marks before it hands on,
// never beside the next group.
//
// # Policies
//
// The parallel bucket validator (the default) keeps a private pool of Buckets mutexes
// per database (8 bytes each: 512 KiB at the default 65,536). A commit locks the
// sorted, de-duplicated bucket indices of its fingerprints and validates; commits
// whose keys share no bucket validate in parallel. It then hands itself, buckets
// still held, to a writer queue shared by all lanes (leader.go): whoever arrives while
// nobody leads takes every validated commit waiting, assigns them consecutive
// positions, records their writes in the table and writes them in one batch, so one
// WAL write serves many commits. The commit unlocks once its position is published. The writer's leader takes no
// bucket, so waiting for it with buckets held cannot deadlock. A member waiting for
// the leader yields its processor a while before it parks: a small group's write
// is shorter than a park and wake-up (RocksDB's write group spins for the same
// reason).
//
// The serial write-group validator allocates no bucket pool. Commits go through the
// same kind of leader queue, but the leader also validates: every queued member in
// arrival order, against the table and against the writes of the members before it;
// it fails only the losers and writes all survivors with their log entries as one
// batch, then hands leadership to the next queued commit. Unlike RocksDB's serial
// policy, members share one write.
//
// # Checks
//
// Applications chain their own Checks. They run inside the validation step, after the
// conflict check and before the write, with a View of the state the commit applies to
// (under the serial policy that includes the writes of earlier members of the same
// group). A Check rejects the commit by returning an error, which the commit returns
// unchanged. Under the parallel policy only the commit's own keys are locked; a Check
// that reads other keys should read them in the transaction instead, so that they are
// tracked. Checks do not run on rockline's own records (Commit.System: a family's
// creation or drop). Applications write checks against pipeline.Check, which the
// pipeline adapts to this package's form.
//
// # Validators from outside
//
// A database takes a validator made outside this package too (pipeline's
// Config.Validator, a Factory): anything that keeps Validator's contract over the Env
// and Options it is given. Writer is the writing half of that contract, the writer
// queue the built-in policies use: an outside validator decides which commits may
// land (conflicts against positions it records, Options.Checks, the context) and
// hands the survivors to a Writer, which assigns positions, writes, fills and
// publishes. test/lockvalidator in the repository is one, run by the conformance
// suite and the model test beside the built-in policies.
//
// # Positions and failures
//
// Positions are assigned only by the writer queue's leader, one group at a time, in
// queue order. The leader records the group's writes in the conflict table at their
// positions and hands the queue on before it writes, so the next group is assigned
// (and, under the serial policy, validated against those writes) while this one is
// written: several groups can be in RocksDB's write path at once, which groups them
// into one WAL write and inserts them into the memtable on their own threads.
// Publication stays in order: a group's Publish returns only once every earlier group
// is written. Under the serial policy with Checks, which read committed state, the
// leader hands on only after its group is published. When a write fails after its
// positions were assigned, the validator writes a filler entry (no events, no writes)
// at each of them so the log stays dense, and the commits fail with the write's
// error. When even the fillers cannot be written, the positions are stopped: every
// later commit fails with ErrStopped, and the next Open fills the gap.
package validators
