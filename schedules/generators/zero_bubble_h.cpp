#include "schedules/registry.h"
namespace ppbench {
Schedule generate_zb_h1(const ScheduleParams&) { require(false, "not implemented yet"); return {}; }
Schedule generate_zb_h2(const ScheduleParams&) { require(false, "not implemented yet"); return {}; }
}
