# orchestrator: the kupdate command.
KUPDATE      := $(BUILD)/bin/kupdate
ORCH_SRC     := $(wildcard orchestrator/*.c)
ORCH_OBJ     := $(patsubst %.c,$(OBJ)/%.o,$(ORCH_SRC))

$(OBJ)/orchestrator/%.o: orchestrator/%.c $(PROTO_H)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ENGINE_CFLAGS) -c $< -o $@

$(KUPDATE): $(ORCH_OBJ) $(LIBCR)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(ORCH_OBJ) $(LIBCR) $(PKG_LIBS)

all: $(KUPDATE)
-include $(ORCH_OBJ:.o=.d)
