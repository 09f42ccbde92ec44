package diagnose

// Placeholder of the XID catalogue table, to be replaced by the full one.

type xidSeverity uint8

const (
	xidUnlisted xidSeverity = iota
	xidInfo
	xidApp
	xidHardware
)

type xidEntry struct {
	mnemonic string
	action   string
	severity xidSeverity
}

var xidCatalog = map[uint32]xidEntry{
	13:  {"ROBUST_CHANNEL_GR_EXCEPTION", "RESTART_APP", xidApp},
	31:  {"ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP", xidApp},
	43:  {"ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "RESTART_APP", xidApp},
	48:  {"ROBUST_CHANNEL_GPU_ECC_DBE", "RESET_GPU", xidHardware},
	63:  {"ROBUST_CHANNEL_ECC_PAGE_RETIREMENT_OR_ROW_REMAPPER_RECORDING_EVENT", "IGNORE", xidInfo},
	79:  {"ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", xidHardware},
	92:  {"ROBUST_CHANNEL_HIGH_SINGLE_BIT_ECC_ERROR_RATE", "IGNORE", xidInfo},
	95:  {"ROBUST_CHANNEL_UNCONTAINED_ECC_ERROR", "RESET_GPU", xidHardware},
	119: {"GSP_RPC_TIMEOUT", "RESET_GPU", xidHardware},
}

var xidActionSeverity = map[string]xidSeverity{"IGNORE": xidInfo, "RESTART_APP": xidApp, "RESET_GPU": xidHardware, "RESTART_BM": xidHardware}
