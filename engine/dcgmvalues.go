package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DCGMSentinel is one of the values DCGM writes in place of a figure it
// does not have (dcgm_structs.h): a blank field, a field not found, not
// supported by the GPU, or not permitted to be read. The exporter prints
// it as if it were a figure; llmdiag reads it as absent.
type DCGMSentinel struct {
	Macro   string // its name in dcgm_structs.h
	Meaning string // blank, not found, not supported, not permissioned
	// Value is the float64 an exposition's text of it parses to (and
	// Prometheus stores): the int64 ones lose their low bits and all
	// become 2^63.
	Value float64
}

// DCGM's sentinel bases (dcgm_structs.h): DCGM_INT32_BLANK,
// DCGM_INT64_BLANK and DCGM_FP64_BLANK. Each type's NOT_FOUND,
// NOT_SUPPORTED and NOT_PERMISSIONED are its BLANK + 1, + 2 and + 3, and
// DCGM_INT32_IS_BLANK, DCGM_INT64_IS_BLANK and DCGM_FP64_IS_BLANK hold
// every value at or above BLANK to be blank.
const (
	dcgmInt32Blank = 0x7ffffff0
	dcgmInt64Blank = 0x7ffffffffffffff0
	dcgmFP64Blank  = 140737488355328.0 // 2^47
)

// DCGMSentinels are DCGM's sentinels of each value type, as their
// exposition parses.
var DCGMSentinels = []DCGMSentinel{
	{"DCGM_INT32_BLANK", "blank", dcgmInt32Blank},
	{"DCGM_INT32_NOT_FOUND", "not found", dcgmInt32Blank + 1},
	{"DCGM_INT32_NOT_SUPPORTED", "not supported", dcgmInt32Blank + 2},
	{"DCGM_INT32_NOT_PERMISSIONED", "not permissioned", dcgmInt32Blank + 3},
	{"DCGM_INT64_BLANK", "blank", float64(int64(dcgmInt64Blank))},
	{"DCGM_INT64_NOT_FOUND", "not found", float64(int64(dcgmInt64Blank + 1))},
	{"DCGM_INT64_NOT_SUPPORTED", "not supported", float64(int64(dcgmInt64Blank + 2))},
	{"DCGM_INT64_NOT_PERMISSIONED", "not permissioned", float64(int64(dcgmInt64Blank + 3))},
	{"DCGM_FP64_BLANK", "blank", dcgmFP64Blank},
	{"DCGM_FP64_NOT_FOUND", "not found", dcgmFP64Blank + 1},
	{"DCGM_FP64_NOT_SUPPORTED", "not supported", dcgmFP64Blank + 2},
	{"DCGM_FP64_NOT_PERMISSIONED", "not permissioned", dcgmFP64Blank + 3},
}

// dcgmType is the type DCGM stores a field's value as (dcgm_fields.h).
type dcgmType int

const (
	dcgmInt64 dcgmType = iota // DCGM_FT_INT64
	dcgmFP64                  // DCGM_FT_DOUBLE
)

// GPUBound is the range of values a GPU field can physically take; a
// value outside it is a broken reading, read as absent.
type GPUBound struct {
	Min, Max float64
	Unit     string
}

// dcgmField is what llmdiag knows of a field's values: DCGM's type and
// its plausible range.
type dcgmField struct {
	typ   dcgmType
	bound GPUBound
}

// dcgmFields are each field's type and bounds. The bounds are generous:
// they hold any GPU sold today with room to spare, and refuse only what no
// GPU reports.
var dcgmFields = [NumGPUFields]dcgmField{
	GPUUtil:        {dcgmInt64, GPUBound{0, 100, "%"}},
	GPUSMActive:    {dcgmFP64, GPUBound{0, 1, ""}},
	GPUTensor:      {dcgmFP64, GPUBound{0, 1, ""}},
	GPUDRAM:        {dcgmFP64, GPUBound{0, 1, ""}},
	GPUFBUsed:      {dcgmInt64, GPUBound{0, 4 << 20, "MiB"}}, // 4 TiB
	GPUFBFree:      {dcgmInt64, GPUBound{0, 4 << 20, "MiB"}},
	GPUPower:       {dcgmFP64, GPUBound{0, 5000, "W"}},
	GPUSMClock:     {dcgmInt64, GPUBound{0, 10000, "MHz"}},
	GPUTemp:        {dcgmInt64, GPUBound{-50, 200, "°C"}},
	GPUClockEvents: {dcgmInt64, GPUBound{0, math.MaxUint32, ""}},
	GPUXID:         {dcgmInt64, GPUBound{0, 65535, ""}},
}

// DCGMBound is field f's plausible range.
func DCGMBound(f GPUField) GPUBound { return dcgmFields[f].bound }

// dcgmSentinel names the DCGM sentinel v is for a field of f's type, ""
// when v is a figure. v is a sentinel when it equals one of any type
// (DCGMSentinels), or is at or above its type's BLANK; an integer field's
// value in the int32 blank range is one too. The int64 sentinels parse to
// one float64, so they are named together.
func dcgmSentinel(f GPUField, v float64) string {
	var macros, meanings []string
	for _, s := range DCGMSentinels {
		if v == s.Value {
			macros = append(macros, s.Macro)
			meanings = append(meanings, s.Meaning)
		}
	}
	switch {
	case len(macros) == 1:
		return fmt.Sprintf("%s (%s)", macros[0], meanings[0])
	case len(macros) > 1:
		return fmt.Sprintf("%s (%s: as a float64 they are one number)", strings.Join(macros, ", "), orList(meanings))
	}
	switch dcgmFields[f].typ {
	case dcgmFP64:
		if v >= dcgmFP64Blank {
			return "at or above DCGM_FP64_BLANK (blank)"
		}
	case dcgmInt64:
		if v >= float64(int64(dcgmInt64Blank)) {
			return "at or above DCGM_INT64_BLANK (blank)"
		}
		if v >= dcgmInt32Blank && v <= math.MaxInt32 {
			return "at or above DCGM_INT32_BLANK (blank)"
		}
	}
	return ""
}

// orList joins "a, b, c or d".
func orList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// implausible says why v is no reading of field f (family fam) on GPU
// gpu, "" when it is within the field's bounds.
func implausible(f GPUField, fam, gpu string, v float64) string {
	b := dcgmFields[f].bound
	if v >= b.Min && v <= b.Max {
		return ""
	}
	unit := ""
	if b.Unit != "" {
		unit = " " + b.Unit
	}
	return fmt.Sprintf("DCGM family %s on GPU %s is %s, outside %s..%s%s: read as absent",
		fam, gpu, plain(v), plain(b.Min), plain(b.Max), unit)
}

// plain writes v without an exponent up to 1e21, as an exposition does.
func plain(v float64) string {
	if math.Abs(v) < 1e21 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
