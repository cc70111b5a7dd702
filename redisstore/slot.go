package redisstore

import (
	"strings"

	"github.com/floodgate-io/floodgate"
)

// slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the part between the first "{" and the next "}",
// when not empty), modulo 16384.
func slot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return crc16(key) % 16384
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func sameSlot(prefix string, reqs []floodgate.Request) bool {
	first := slot(prefix + reqs[0].Key)
	for _, rq := range reqs[1:] {
		if slot(prefix+rq.Key) != first {
			return false
		}
	}
	return true
}
