package redisstore

import (
	"context"
	"fmt"

	"github.com/floodgate-io/floodgate"
)

// Reset forgets key: its next request starts from a full state.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := floodgate.ValidateRequest(key, 0); err != nil {
		return err
	}
	callCtx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	if err := l.client.Do(callCtx, l.client.B().Del().Key(l.cfg.KeyPrefix+key).Build()).Error(); err != nil {
		return fmt.Errorf("redisstore: resetting %q: %w", key, l.storeError(ctx, key, err))
	}
	return nil
}
