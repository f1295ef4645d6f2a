#include "schedules/registry.h"
namespace ppbench {
Schedule generate_dualpipev(const ScheduleParams&) { require(false, "not implemented yet"); return {}; }
}
