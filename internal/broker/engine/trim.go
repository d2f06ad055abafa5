package engine

import "github.com/flxproto/felix"

// TrimHead discards the records of a durable shard below offset before, as
// retention would: afterwards the shard's earliest retained offset is
// min(before, tail), and a start or read below it is a too_old cursor
// error. Trimming below the current head does nothing.
func (e *Engine) TrimHead(t Topic, shardIdx uint32, before uint64) error {
	sh, err := e.shard(t, shardIdx)
	if err != nil {
		return err
	}
	if !sh.st.cfg.Durable {
		return errorf(felix.CodeInvalidRequest, "stream has no history (ephemeral)")
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for sh.base < before && sh.base < sh.next {
		sh.dropOldestLocked()
	}
	sh.accountLog()
	return nil
}
