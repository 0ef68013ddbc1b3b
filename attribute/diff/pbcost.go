package diff

import (
	"encoding/binary"
	"fmt"
)

// The pprof parser turns a few bytes of protobuf into structs, slices and
// map entries of a hundred bytes or more, so a small profile can cost tens
// of times its size to parse (see the cost constants below). So before
// handing bytes to it, loadCost walks the encoding (profile.proto) and
// estimates what parsing will allocate; maxLoadCost bounds that estimate.
const maxLoadCost = 256 << 20

// Estimated bytes per element, from the structs of
// github.com/google/pprof/profile with slice growth and map overhead.
const (
	costSample     = 176 // Sample, its pointer, its label maps
	costLocationID = 24  // locationIDX entry and *Location
	costValue      = 16  // Value entry (append growth)
	costLabel      = 160 // label struct and its map entry
	costLocation   = 160
	costLine       = 80
	costFunction   = 120
	costMapping    = 200
	costString     = 24 // string header; the bytes count too
	costOther      = 64
)

// loadCost estimates the bytes profile.ParseUncompressed allocates for the
// protobuf b, or returns an error where b is not a protobuf message.
func loadCost(b []byte) (int64, error) {
	var cost int64
	err := walkProto(b, func(field uint64, wire int, v []byte) error {
		switch {
		case field == 2 && wire == 2: // Sample
			cost += costSample
			return walkProto(v, func(f uint64, w int, sv []byte) error {
				switch f {
				case 1:
					cost += costLocationID * countValues(w, sv)
				case 2:
					cost += costValue * countValues(w, sv)
				case 3:
					cost += costLabel
				}
				return nil
			})
		case field == 4 && wire == 2: // Location
			cost += costLocation
			return walkProto(v, func(f uint64, w int, _ []byte) error {
				if f == 4 {
					cost += costLine
				}
				return nil
			})
		case field == 5:
			cost += costFunction
		case field == 3:
			cost += costMapping
		case field == 6:
			cost += costString + int64(len(v))
		default:
			cost += costOther
		}
		return nil
	})
	return cost, err
}

// countValues is how many integers a repeated field entry holds: one, or
// for a packed entry one per varint.
func countValues(wire int, v []byte) int64 {
	if wire != 2 {
		return 1
	}
	var n int64
	for _, c := range v {
		if c < 0x80 {
			n++
		}
	}
	return n
}

// walkProto calls fn for every field of the message b, with the payload of
// length-delimited fields (v is nil for the others).
func walkProto(b []byte, fn func(field uint64, wire int, v []byte) error) error {
	for pos := 0; pos < len(b); {
		key, n := binary.Uvarint(b[pos:])
		if n <= 0 {
			return fmt.Errorf("bad protobuf field key at byte %d", pos)
		}
		pos += n
		field, wire := key>>3, int(key&7)
		var v []byte
		switch wire {
		case 0:
			if _, n = binary.Uvarint(b[pos:]); n <= 0 {
				return fmt.Errorf("bad protobuf varint at byte %d", pos)
			}
			pos += n
		case 1:
			pos += 8
		case 5:
			pos += 4
		case 2:
			l, n := binary.Uvarint(b[pos:])
			if n <= 0 || l > uint64(len(b)-pos-n) {
				return fmt.Errorf("bad protobuf length at byte %d", pos)
			}
			pos += n
			v = b[pos : pos+int(l)]
			pos += int(l)
		default:
			return fmt.Errorf("protobuf wire type %d at byte %d is not one pprof uses", wire, pos)
		}
		if pos > len(b) {
			return fmt.Errorf("protobuf field runs past the end at byte %d", len(b))
		}
		if err := fn(field, wire, v); err != nil {
			return err
		}
	}
	return nil
}
