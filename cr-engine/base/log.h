/* Logging: public, shared with the orchestrator (cr-engine/include/cr-log.h). */
#ifndef CR_LOG_H
#define CR_LOG_H

#include "cr-log.h"

#endif
