#include "schedules/registry.h"
namespace ppbench {
Schedule generate_zb_v(const ScheduleParams&) { require(false, "not implemented yet"); return {}; }
}
