package diagnose

// The XID grading table, from NVIDIA's XID catalogue ("Analyzing Xid Errors
// with the Xid Catalog",
// https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, read
// 2026-12-06). docs/gpu-xid.md gives the table with each grade and the
// reason for every decision below; TestXIDCatalogPage holds the two to each
// other.

// xidSeverity is how llmdiag grades an XID, from the catalogue's immediate action.
type xidSeverity uint8

const (
	xidUnlisted xidSeverity = iota // not in the table
	xidInfo                        // informational: no action (OK)
	xidApp                         // caused by or recoverable in the application (WARN, routable)
	xidHardware                    // needs a GPU reset or a reboot (CRIT, not routable)
)

// xidEntry is one row of NVIDIA's XID catalogue as llmdiag reads it.
type xidEntry struct {
	mnemonic string // the catalogue's mnemonic, e.g. "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
	action   string // the catalogue's immediate action, e.g. "RESTART_BM"
	severity xidSeverity
}

// xidCatalog holds the XIDs the catalogue lists for A100, H100, B100 or GB200, by code.
//
// Left out: the rows described as "Unused" (14 and 108 among them, though
// marked as applying to all four GPUs) and those applying to none of the
// four (152, 153). 162 to 170 apply to B100 or GB200 but have no immediate
// action in the catalogue, so llmdiag has nothing to grade them by. 171 and
// 172 have none either and are kept, with an empty action, for the reason
// given in xidSeverityOverride.
var xidCatalog = map[uint32]xidEntry{
	8:   {"ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "RESTART_APP", xidApp},                          // GPU stopped processing
	11:  {"ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "RESTART_APP", xidApp},                              // Invalid or corrupted push buffer stream
	13:  {"ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY", "RESTART_APP", xidApp}, // Graphics Engine Exception
	25:  {"ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "RESTART_APP", xidApp},                                // Invalid or illegal push buffer stream
	31:  {"ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP", xidApp},                           // GPU memory page fault
	32:  {"ROBUST_CHANNEL_PBDMA_ERROR", "RESTART_APP", xidApp},                                      // Invalid or corrupted push buffer stream
	37:  {"ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "IGNORE", xidInfo},                       // Driver firmware error
	38:  {"ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "IGNORE", xidInfo},                            // Driver firmware error
	39:  {"ROBUST_CHANNEL_CE0_ERROR", "RESTART_APP", xidApp},                                        // Copy Engine Exception
	40:  {"ROBUST_CHANNEL_CE1_ERROR", "RESTART_APP", xidApp},                                        // Copy Engine Exception
	41:  {"ROBUST_CHANNEL_CE2_ERROR", "RESTART_APP", xidApp},                                        // Copy Engine Exception
	43:  {"ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "IGNORE", xidApp},                              // GPU stopped processing
	44:  {"ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "IGNORE", xidInfo},                                // Graphics Engine fault during context switch
	45:  {"ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45", xidApp},                           // Preemptive cleanup, due to previous errors – Most likely to see when running multiple cuda applications and hitting a DBE
	46:  {"ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "RESET_GPU", xidHardware},                             // GPU stopped processing
	48:  {"ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48", xidHardware},                             // Double Bit ECC Error
	54:  {"SILENT_RUNNING_PWR_REDUCED_CLOCKING", "CHECK_MECHANICALS", xidHardware},                  // Auxiliary power is not connected to the GPU board
	60:  {"ROBUST_CHANNEL_SEC2_ERROR", "RESTART_APP", xidApp},                                       // Video processor exception
	62:  {"PMU_HALT_ERROR", "RESET_GPU", xidHardware},                                               // Internal micro-controller halt (newer drivers)
	63:  {"INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE", xidInfo},                                       // GPU memory remapping event
	64:  {"INFOROM_DRAM_RETIREMENT_FAILURE", "RESET_GPU", xidHardware},                              // GPU memory remapping failure
	66:  {"ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "IGNORE", xidInfo},                        // Illegal access by driver
	67:  {"ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "IGNORE", xidInfo},                             // Illegal access by driver
	68:  {"ROBUST_CHANNEL_NVDEC0_ERROR", "RESTART_APP", xidApp},                                     // NVDEC0 Exception
	69:  {"ROBUST_CHANNEL_GR_CLASS_ERROR", "RESTART_APP", xidApp},                                   // Graphics Engine class error
	70:  {"ROBUST_CHANNEL_CE3_ERROR", "RESTART_APP", xidApp},                                        // CE3: Unknown Error
	71:  {"ROBUST_CHANNEL_CE4_ERROR", "RESTART_APP", xidApp},                                        // CE4: Unknown Error
	72:  {"ROBUST_CHANNEL_CE5_ERROR", "RESTART_APP", xidApp},                                        // CE5: Unknown Error
	74:  {"NVLINK_ERROR", "WORKFLOW_NVLINK_ERR", xidHardware},                                       // NVLINK Error
	75:  {"ROBUST_CHANNEL_CE6_ERROR", "RESTART_APP", xidApp},                                        // CE6: Unknown Error
	76:  {"ROBUST_CHANNEL_CE7_ERROR", "RESTART_APP", xidApp},                                        // CE7: Unknown Error
	77:  {"ROBUST_CHANNEL_CE8_ERROR", "RESTART_APP", xidApp},                                        // CE8: Unknown Error
	78:  {"VGPU_START_ERROR", "UPDATE_SWFW", xidHardware},                                           // vGPU Start Error
	79:  {"ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", xidHardware},                   // GPU has fallen off the bus
	80:  {"PBDMA_PUSHBUFFER_CRC_MISMATCH", "RESTART_APP", xidApp},                                   // Corrupted data sent to GPU
	82:  {"ROBUST_CHANNEL_NVJPG0_ERROR", "RESTART_APP", xidApp},                                     // NVJPG0 Error
	83:  {"ROBUST_CHANNEL_NVDEC1_ERROR", "RESTART_APP", xidApp},                                     // NVDEC1 Error
	84:  {"ROBUST_CHANNEL_NVDEC2_ERROR", "RESTART_APP", xidApp},                                     // NVDEC2 Error
	85:  {"ROBUST_CHANNEL_CE9_ERROR", "RESTART_APP", xidApp},                                        // CE9: Unknown Error
	86:  {"ROBUST_CHANNEL_OFA0_ERROR", "RESTART_APP", xidApp},                                       // OFA Exception
	88:  {"ROBUST_CHANNEL_NVDEC3_ERROR", "RESTART_APP", xidApp},                                     // NVDEC3 Error
	89:  {"ROBUST_CHANNEL_NVDEC4_ERROR", "RESTART_APP", xidApp},                                     // NVDEC4 Error
	92:  {"EXCESSIVE_SBE_INTERRUPTS", "IGNORE", xidInfo},                                            // High single-bit ECC error rate
	93:  {"INFOROM_ERASE_LIMIT_EXCEEDED", "IGNORE", xidInfo},                                        // Non-fatal violation of provisioned InfoROM wear limit
	94:  {"ROBUST_CHANNEL_CONTAINED_ERROR", "RESTART_APP", xidApp},                                  // Contained memory error
	95:  {"ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU", xidHardware},                             // Uncontained memory error
	96:  {"ROBUST_CHANNEL_NVDEC5_ERROR", "RESTART_APP", xidApp},                                     // NVDEC5 Error
	97:  {"ROBUST_CHANNEL_NVDEC6_ERROR", "RESTART_APP", xidApp},                                     // NVDEC6 Error
	98:  {"ROBUST_CHANNEL_NVDEC7_ERROR", "RESTART_APP", xidApp},                                     // NVDEC7 Error
	99:  {"ROBUST_CHANNEL_NVJPG1_ERROR", "RESTART_APP", xidApp},                                     // NVJPG1 Error
	100: {"ROBUST_CHANNEL_NVJPG2_ERROR", "RESTART_APP", xidApp},                                     // NVJPG2 Error
	101: {"ROBUST_CHANNEL_NVJPG3_ERROR", "RESTART_APP", xidApp},                                     // NVJPG3 Error
	102: {"ROBUST_CHANNEL_NVJPG4_ERROR", "RESTART_APP", xidApp},                                     // NVJPG4 Error
	103: {"ROBUST_CHANNEL_NVJPG5_ERROR", "RESTART_APP", xidApp},                                     // NVJPG5 Error
	104: {"ROBUST_CHANNEL_NVJPG6_ERROR", "RESTART_APP", xidApp},                                     // NVJPG6 Error
	105: {"ROBUST_CHANNEL_NVJPG7_ERROR", "RESTART_APP", xidApp},                                     // NVJPG7 Error
	106: {"SMBPBI_TEST_MESSAGE", "IGNORE", xidInfo},                                                 // SMBPBI Test Message
	107: {"SMBPBI_TEST_MESSAGE_SILENT", "IGNORE", xidInfo},                                          // SMBPBI Test Message Silent
	109: {"ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "RESET_GPU", xidHardware},                           // Context Switch Timeout Error
	110: {"SEC_FAULT_ERROR", "RESET_GPU", xidHardware},                                              // Security Fault Error
	119: {"GSP_RPC_TIMEOUT", "RESET_GPU", xidHardware},                                              // GSP RPC Timeout
	120: {"GSP_ERROR", "RESET_GPU", xidHardware},                                                    // GSP Error
	121: {"C2C_ERROR", "IGNORE", xidInfo},                                                           // C2C Error
	126: {"ROBUST_CHANNEL_CE10_ERROR", "RESTART_APP", xidApp},                                       // CE10: Unknown Error
	127: {"ROBUST_CHANNEL_CE11_ERROR", "RESTART_APP", xidApp},                                       // CE11: Unknown Error
	128: {"ROBUST_CHANNEL_CE12_ERROR", "RESTART_APP", xidApp},                                       // CE12: Unknown Error
	129: {"ROBUST_CHANNEL_CE13_ERROR", "RESTART_APP", xidApp},                                       // CE13: Unknown Error
	130: {"ROBUST_CHANNEL_CE14_ERROR", "RESTART_APP", xidApp},                                       // CE14: Unknown Error
	131: {"ROBUST_CHANNEL_CE15_ERROR", "RESTART_APP", xidApp},                                       // CE15: Unknown Error
	132: {"ROBUST_CHANNEL_CE16_ERROR", "RESTART_APP", xidApp},                                       // CE16: Unknown Error
	133: {"ROBUST_CHANNEL_CE17_ERROR", "RESTART_APP", xidApp},                                       // CE17: Unknown Error
	134: {"ROBUST_CHANNEL_CE18_ERROR", "RESTART_APP", xidApp},                                       // CE18: Unknown Error
	135: {"ROBUST_CHANNEL_CE19_ERROR", "RESTART_APP", xidApp},                                       // CE19: Unknown Error
	136: {"ALI_TRAINING_FAIL", "RESET_GPU", xidHardware},                                            // Link Training Failed
	137: {"NVLINK_PRIV_ERR", "IGNORE", xidInfo},                                                     // NVLink Privilege Error
	139: {"ROBUST_CHANNEL_OFA1_ERROR", "RESTART_APP", xidApp},                                       // OFA1 Error
	140: {"UNRECOVERABLE_ECC_ERROR_ESCAPE", "RESET_GPU", xidHardware},                               // ECC Unrecovered Error
	141: {"ROBUST_CHANNEL_FAST_PATH_ERROR", "IGNORE", xidInfo},                                      // CUDA Fast Path Error
	142: {"ROBUST_CHANNEL_NVENC3_ERROR", "CONTACT_SUPPORT", xidApp},                                 // NVENC3 Error
	143: {"GPU_INIT_ERROR", "RESET_GPU", xidHardware},                                               // GPU Initialization Error
	144: {"NVLINK_SAW_ERROR", "WORKFLOW_NVLINK5_ERR", xidHardware},                                  // NVLINK: SAW Error
	145: {"NVLINK_RLW_ERROR", "WORKFLOW_NVLINK5_ERR", xidHardware},                                  // NVLINK: RLW Error
	146: {"NVLINK_TLW_ERROR", "WORKFLOW_NVLINK5_ERR", xidHardware},                                  // NVLINK: TLW Error
	147: {"NVLINK_TREX_ERROR", "WORKFLOW_NVLINK5_ERR", xidInfo},                                     // NVLINK: TREX Error
	148: {"NVLINK_NVLPW_CTRL_ERROR", "WORKFLOW_NVLINK5_ERR", xidInfo},                               // NVLINK: NVLPW_CTRL Error
	149: {"NVLINK_NETIR_ERROR", "WORKFLOW_NVLINK5_ERR", xidHardware},                                // NVLINK: NETIR Error
	150: {"NVLINK_MSE_ERROR", "WORKFLOW_NVLINK5_ERR", xidHardware},                                  // NVLINK: MSE Error
	151: {"ROBUST_CHANNEL_KEY_ROTATION_ERROR", "RESTART_VM", xidHardware},                           // Key rotation Error
	154: {"GPU_RECOVERY_ACTION_CHANGED", "XID_154", xidHardware},                                    // GPU Recovery Action Changed
	155: {"NVLINK_SW_DEFINED_ERROR", "RESET_GPU", xidHardware},                                      // NVLINK: SW Defined Error
	156: {"RESOURCE_RETIREMENT_EVENT", "RESET_GPU", xidHardware},                                    // Resource Retirement Event
	157: {"RESOURCE_RETIREMENT_FAILURE", "IGNORE", xidInfo},                                         // Resource Retirement Failure
	158: {"GPU_FATAL_TIMEOUT", "RESET_GPU", xidHardware},                                            // GPU Fatal Timeout
	159: {"ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHECK_UVM", xidHardware},                            // CHI Non-Data Error
	160: {"CHANNEL_RETIREMENT_EVENT", "IGNORE", xidInfo},                                            // Channel Retirement Event
	161: {"CHANNEL_RETIREMENT_FAILURE", "IGNORE", xidInfo},                                          // Channel Retirement Failure
	171: {"UNCORRECTABLE_DRAM_ERROR", "", xidHardware},                                              // Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM
	172: {"UNCORRECTABLE_SRAM_ERROR", "", xidHardware},                                              // Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM
}

// xidActionSeverity maps each immediate action the catalogue uses to a severity.
// The catalogue's own meaning of each bucket, and why it grades so, is in
// docs/gpu-xid.md.
var xidActionSeverity = map[string]xidSeverity{
	"IGNORE":               xidInfo,     // no action required
	"RESTART_APP":          xidApp,      // restart the application; no GPU reset or reboot needed
	"WORKFLOW_XID_45":      xidApp,      // alone: restart Fabric Manager; with another XID: follow that one
	"CONTACT_SUPPORT":      xidApp,      // no recovery named: a look, not a drain
	"RESET_GPU":            xidHardware, // reset the GPU
	"RESTART_BM":           xidHardware, // restart the bare-metal host
	"RESTART_VM":           xidHardware, // restart the VM that owns the GPU: the whole node, seen from inside it
	"WORKFLOW_XID_48":      xidHardware, // alone: reset the GPU; with 63 or 64: drain and reset
	"WORKFLOW_NVLINK_ERR":  xidHardware, // decode the registers; a GPU reset or node reboot clears it
	"WORKFLOW_NVLINK5_ERR": xidHardware, // decode the message: IGNORE to RESET_GPU, which llmdiag cannot tell apart
	"XID_154":              xidHardware, // follow the recovery action in the message, which llmdiag does not read
	"CHECK_UVM":            xidHardware, // reset the GPU if UVM or vGPU is in use, which llmdiag cannot see
	"CHECK_MECHANICALS":    xidHardware, // check seating and connections: hands on the machine
	"UPDATE_SWFW":          xidHardware, // update driver and firmware before the vGPU can start
}

// xidSeverityOverride grades the codes whose severity is not that of their
// immediate action, each for the reason given.
var xidSeverityOverride = map[uint32]xidSeverity{
	// IGNORE, for the GPU: it "remains in a healthy state". But the XID is
	// logged when the application hits a fault and must terminate, so the
	// engine on it died: graded as 13 and 31 are.
	43: xidApp,
	// WORKFLOW_NVLINK5_ERR, whose decode sheet has only IGNORE rows for 147
	// (noted as not in production code) and 148.
	147: xidInfo,
	148: xidInfo,
	// No immediate action given: the catalogue describes both as "additional
	// to Xid 48", telling a DRAM from an SRAM double-bit error. The XID
	// field keeps only the last XID, so one logged after its 48 would hide
	// the 48; they are graded as 48 is.
	171: xidHardware,
	172: xidHardware,
}
