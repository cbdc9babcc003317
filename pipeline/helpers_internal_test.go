package pipeline

// local returns the local engine behind db (internal tests only).
func (db *DB) local() *localDB { return db.eng.(*localDB) }

// local returns the local engine's transaction behind t (internal tests only).
func (t *Txn) local() *localTxn { return t.eng.(*localTxn) }
