#include "schedules/registry.h"
namespace ppbench {
Schedule generate_dualpipe(const ScheduleParams&) { require(false, "not implemented yet"); return {}; }
}
