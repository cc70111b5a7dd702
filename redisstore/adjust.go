package redisstore

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
)

// adjustScript is Adjust's script (lua/adjust.lua on the structured
// helpers). It is immutable once built, so every Limiter shares it.
var adjustScript = rueidis.NewLuaScript(luaSource("prelude", "bucket", "window", "log", "adjust"))

// Adjust implements floodgate.Adjuster with the arithmetic of the in-memory
// store (internal/algo/adjust.go), in one script call: atomic, within
// Config.Timeout as AllowN is, and with AllowN's errors (bad input as is,
// no answer in time wrapping floodgate.ErrStoreUnavailable: the adjustment
// may then still have been applied). The key then lives until
// its state is empty again, as after a decision; one adjusted back to empty
// is deleted at once. A delta of 0 is validated and sends nothing.
func (l *Limiter) Adjust(ctx context.Context, key string, limit floodgate.Limit, delta int64) error {
	if err := floodgate.ValidateAdjustment(key, delta); err != nil {
		return err
	}
	c, err := l.prepare(key, limit, 0)
	if err != nil || delta == 0 {
		return err
	}
	return l.do(ctx, key, func(ctx context.Context, _ *pending) error {
		if err := adjustScript.Exec(ctx, l.client, []string{l.cfg.KeyPrefix + key}, l.args(c, delta)).Error(); err != nil {
			return l.storeError(ctx, key, err)
		}
		return nil
	})
}
