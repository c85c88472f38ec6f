/* Test-only fault injection: public, shared with the orchestrator
 * (cr-engine/include/cr-fault.h). */
#ifndef CR_FAULT_H
#define CR_FAULT_H

#include "cr-fault.h"

#endif
