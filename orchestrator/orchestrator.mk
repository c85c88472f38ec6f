# orchestrator: the kupdate command.
KUPDATE      := $(BUILD)/bin/kupdate
ORCH_SRC     := $(wildcard orchestrator/*.c)
ORCH_OBJ     := $(patsubst %.c,$(OBJ)/%.o,$(ORCH_SRC))
ORCH_PROTOS  := $(wildcard orchestrator/images/*.proto)
ORCH_PROTO_C := $(patsubst orchestrator/images/%.proto,$(GEN)/orch-images/%.pb-c.c,$(ORCH_PROTOS))
ORCH_PROTO_H := $(ORCH_PROTO_C:.c=.h)
ORCH_PROTO_OBJ := $(patsubst $(GEN)/%.c,$(OBJ)/gen/%.o,$(ORCH_PROTO_C))

$(GEN)/orch-images/%.pb-c.c $(GEN)/orch-images/%.pb-c.h: orchestrator/images/%.proto
	@mkdir -p $(GEN)/orch-images
	$(Q)protoc-c --proto_path=orchestrator/images --c_out=$(GEN)/orch-images $<

$(OBJ)/orchestrator/%.o: orchestrator/%.c $(PROTO_H) $(ORCH_PROTO_H)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ENGINE_CFLAGS) -c $< -o $@

$(KUPDATE): $(ORCH_OBJ) $(ORCH_PROTO_OBJ) $(LIBCR)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(ORCH_OBJ) $(ORCH_PROTO_OBJ) $(LIBCR) $(PKG_LIBS)

all: $(KUPDATE)
.SECONDARY: $(ORCH_PROTO_C) $(ORCH_PROTO_H)
-include $(ORCH_OBJ:.o=.d)
