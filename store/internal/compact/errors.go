package compact

import "errors"

// errCorrupt is returned for bytes this package did not write.
var errCorrupt = errors.New("compact: corrupt data")
