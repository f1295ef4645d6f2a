#include "schedules/registry.h"
namespace ppbench {
Schedule generate_chimera(const ScheduleParams&) { require(false, "not implemented yet"); return {}; }
}
